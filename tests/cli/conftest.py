"""CLI test fixtures: real run directories and a runner that keeps stdout and stderr apart."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ftaudit.cli.app import app
from tests.cli.runs import RunShape, write_run

Invoke = Callable[..., Result]


def check_exit(result: Result, code: int) -> None:
    """Assert the exit code, showing everything the command said when it differs."""
    assert result.exit_code == code, (
        f"exit {result.exit_code}, expected {code}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}\n"
        f"--- exception ---\n{result.exception!r}"
    )


@pytest.fixture
def ftaudit() -> Invoke:
    """``ftaudit(*args)``: run the ``ftaudit`` app in-process (NO_COLOR, COLUMNS=120)."""
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
    return write_run(tmp_path_factory.mktemp("bad") / "run", RunShape(drop_id_at_step=2))


@pytest.fixture
def fresh_run(tmp_path: Path) -> Path:
    """A run of this test's own, to damage."""
    return write_run(tmp_path / "run")
