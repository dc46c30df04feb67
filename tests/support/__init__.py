"""What several test packages share: the one run builder (``builder``), the ready-made runs
written with it (``runs``), ways to damage a run (``corrupt``) and CLI helpers (fixtures are
in ``tests/conftest.py``). Test packages import from here, never from each other."""
