"""One error tree: every exception class lives in ``ftaudit/errors.py`` under FtauditError, and
a user's mistake is an FtauditError (the CLI maps those to one line and an exit code)."""

from __future__ import annotations

import ast
import builtins
import inspect
from pathlib import Path

import pytest

from ftaudit import errors
from ftaudit.errors import FtauditError, UsageError

SRC = Path(__file__).resolve().parents[1] / "src"
EXCEPTION_BASES = {name for name, _ in inspect.getmembers(errors, inspect.isclass)} | {
    n for n in dir(builtins) if n.endswith(("Error", "Exception"))
}


def test_every_exception_class_is_in_errors_py() -> None:
    outside = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "errors.py" and path.parent.name == "ftaudit":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
                if bases & EXCEPTION_BASES:
                    outside.append(f"{path.relative_to(SRC)}: {node.name}")
    assert not outside, outside


def test_every_error_class_is_an_ftaudit_error() -> None:
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        if cls.__module__ == errors.__name__:
            assert issubclass(cls, FtauditError), cls


def test_a_users_mistake_is_a_usage_error(tmp_path: Path) -> None:
    from ftaudit.trainer_hooks import DriverSession, WitnessIdAllocator

    with pytest.raises(UsageError, match="must be positive"):
        WitnessIdAllocator(0)
    DriverSession.start(tmp_path, buffer_size=100).finish()
    with pytest.raises(UsageError, match="buffer size"):
        DriverSession.start(tmp_path, buffer_size=50)
    with pytest.raises(UsageError, match="no complete checkpoint"):
        DriverSession.start(tmp_path, buffer_size=100, resume_from=7)
