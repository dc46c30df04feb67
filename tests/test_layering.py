"""SPEC §8 layering, for every public entry point: importing it pulls in nothing it must not.

Only ``trainer_hooks/<framework>`` (and integrations) import torch, Ray or Megatron; the
event log knows no verifier; a process that only writes events loads no DuckDB. Each entry
point is imported once in a fresh interpreter; each forbidden package is its own case.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest

FRAMEWORKS = ("torch", "ray", "megatron", "ftaudit.trainer_hooks.torch")
CORE = (*FRAMEWORKS, "ftaudit.trainer_hooks")
DTENSOR = ("torch.distributed.tensor", "torch.distributed.checkpoint")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "ftaudit": (*CORE, "duckdb", "ftaudit.verifier"),
    "ftaudit.eventlog": (*CORE, "ftaudit.verifier", "duckdb"),
    "ftaudit.eventlog.writer": (*CORE, "ftaudit.verifier", "duckdb"),
    "ftaudit.dataset": (*CORE, "ftaudit.verifier"),
    "ftaudit.verifier": CORE,
    "ftaudit.verifier.rules_doc": CORE,
    "ftaudit.verifier.incremental": CORE,
    "ftaudit.synth": CORE,
    "ftaudit.cli.synth_cmd": CORE,
    "ftaudit.cli.app": (*CORE, "ftaudit.verifier", "rich"),
    "ftaudit.cli.verify_cmd": (*CORE, "ftaudit.verifier", "rich", "typer"),
    "ftaudit.trainer_hooks": (*FRAMEWORKS, "ftaudit.verifier", "duckdb"),
    # every process of a job loads the torch hooks (each Ray worker of the demo): DTensor
    # and DCP cost over a second of CPU there, and only FSDP and the full/dcp layouts use them
    "ftaudit.trainer_hooks.torch": (*DTENSOR, "ftaudit.verifier", "duckdb"),
    "ftaudit.demo.cell": DTENSOR,
}
"""Entry point -> packages (and their submodules) importing it must not load."""


@cache
def _loaded(entry: str) -> frozenset[str]:
    code = f"import json, sys, {entry}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return frozenset(json.loads(done.stdout))


@pytest.mark.parametrize(
    ("entry", "forbidden"),
    [(entry, name) for entry, names in FORBIDDEN.items() for name in names],
)
def test_entry_point_does_not_import(entry: str, forbidden: str) -> None:
    hits = sorted(m for m in _loaded(entry) if m == forbidden or m.startswith(f"{forbidden}."))
    assert not hits, f"importing {entry} loads {hits[:5]}"
