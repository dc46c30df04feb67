"""One owner per concept: no module imports another module's ``_private`` names.

When a second module needs a thing, it moves to where both import it publicly.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def test_no_private_name_is_imported_across_modules() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ftaudit"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        offenders.append(f"{path.relative_to(SRC)}: {node.module}.{alias.name}")
    assert not offenders, offenders


TESTS = Path(__file__).resolve().parent


def test_test_packages_share_only_through_tests_support() -> None:
    """A test package imports its own modules and ``tests.support``, never another test
    package's (what two packages need moves to ``tests/support``)."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        own = path.relative_to(TESTS).parts[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
                package = node.module.split(".")[1]
                if package not in (own, "support"):
                    offenders.append(f"{path.relative_to(TESTS)}: {node.module}")
    assert not offenders, offenders
