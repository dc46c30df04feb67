"""What several test packages share: run builders and CLI helpers (fixtures are in
``tests/conftest.py``). Test packages import from here, never from each other."""
