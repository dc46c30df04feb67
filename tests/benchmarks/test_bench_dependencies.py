"""Every package a benchmark imports is installed by the project: a core dependency or
an extra (``bench`` for the plots), so ``pip install -e .[...]`` is enough to run them."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OWN = {"ftaudit", "tests", "benchmarks"} | {p.stem for p in (ROOT / "benchmarks").glob("*.py")}
"""This project's own modules: its packages, and the benchmark scripts (one may import
another beside it: ``online_replay`` writes the run ``online_bench`` follows)."""


def _imported(path: Path) -> set[str]:
    """The top-level modules ``path`` imports, anywhere in it (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in OWN}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    return {_normal(re.match(r"[A-Za-z0-9_.-]+", s).group(0)) for s in specs}


def test_every_benchmark_import_is_a_dependency_or_an_extra() -> None:
    declared = _declared()
    dists = packages_distributions()
    missing = {}
    for path in sorted((ROOT / "benchmarks").rglob("*.py")):
        for module in _imported(path):
            found = {_normal(d) for d in dists.get(module, [module])}
            if not found & declared:
                missing[f"{path.relative_to(ROOT)}: {module}"] = sorted(found)
    assert not missing, f"imported but in no dependency or extra of pyproject.toml: {missing}"
