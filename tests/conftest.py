"""Fixtures and settings every test shares: an isolated terminal, no timing assumptions, the
in-process CLI and the small real runs that many packages read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from typer.testing import CliRunner, Result

from tests.support.cli import Invoke
from tests.support.runs import write_run

# A loaded machine runs an example in seconds, not milliseconds: no per-example deadline
# and no "too slow" health check, so a property test fails only on a wrong result.
settings.register_profile(
    "ftaudit", deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
settings.load_profile("ftaudit")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each module's tests on one pytest-xdist worker (``make test`` runs two, with
    ``--dist loadgroup``), so a module's shared fixtures are built once, as in a serial run.

    A module whose tests share nothing and mostly wait (real Ray runs waiting out torchft's
    heartbeat timeouts) sets ``SPREAD_OVER_WORKERS = True``: its tests run side by side.
    """
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and not getattr(module, "SPREAD_OVER_WORKERS", False):
            item.add_marker(pytest.mark.xdist_group(module.__name__))


@pytest.fixture(autouse=True)
def _isolated_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    # writers that lose events leave last-chance records here, not in the machine's temp dir
    monkeypatch.setenv("FTAUDIT_FALLBACK_DIR", str(tmp_path_factory.getbasetemp() / "fallback"))
    monkeypatch.setenv("COLUMNS", "120")
    os.environ.pop("FORCE_COLOR", None)


@pytest.fixture
def ftaudit() -> Invoke:
    """``ftaudit(*args)``: run the ``ftaudit`` app in-process (NO_COLOR, COLUMNS=120)."""
    from ftaudit.cli.app import app

    runner = CliRunner()

    def invoke(*args: str | Path) -> Result:
        return runner.invoke(app, [str(a) for a in args])

    return invoke


@pytest.fixture(scope="session")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fault-free run on which every rule holds (shared: tests only read it)."""
    return write_run(tmp_path_factory.mktemp("good") / "run")


@pytest.fixture(scope="session")
def bad_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same run, except that one sample of step 2 never reached cell 0's weights."""
    return write_run(tmp_path_factory.mktemp("bad") / "run", drop_id_at_step=2)


@pytest.fixture
def fresh_run(tmp_path: Path) -> Path:
    """A run of this test's own, to damage."""
    return write_run(tmp_path / "run")
