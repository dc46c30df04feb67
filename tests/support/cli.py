"""Running the CLI in-process and checking what it said."""

from __future__ import annotations

from collections.abc import Callable

from typer.testing import Result

Invoke = Callable[..., Result]
"""``ftaudit(*args)``: the ``ftaudit`` fixture's type."""


def check_exit(result: Result, code: int) -> None:
    """Assert the exit code, showing everything the command said when it differs."""
    assert result.exit_code == code, (
        f"exit {result.exit_code}, expected {code}\n"
        f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}\n"
        f"--- exception ---\n{result.exception!r}"
    )


__all__ = ["Invoke", "check_exit"]
