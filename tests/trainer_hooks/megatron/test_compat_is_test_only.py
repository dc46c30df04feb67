"""The CPU compatibility layer for megatron-core is test-only: product code never imports it.

``tests/trainer_hooks/megatron/cpu_compat.py`` patches torch so that megatron's CUDA-only
calls run on the CPU. Were product code to import it (or anything from ``tests``), a
real training job would run with torch patched. Read statically: nothing is imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[3] / "src" / "ftaudit"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_no_product_module_imports_the_compat_layer_or_tests() -> None:
    files = sorted(SRC.rglob("*.py"))
    assert len(files) > 50  # the whole package was read
    offenders = {
        str(path.relative_to(SRC)): sorted(
            n for n in _imports(path) if n.startswith("tests") or "cpu_compat" in n
        )
        for path in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}
