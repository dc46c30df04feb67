"""The read-floor script reads every event of a run each way it times (no timing asserted)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import ModuleType

import pytest

from ftaudit.synth import synthesize
from tests.support.processes import load_benchmark
from tests.support.synth_runs import LOOKBACK


def _floor() -> ModuleType:
    return load_benchmark("segment_read_floor.py")


@pytest.mark.parametrize("how", ["pyarrow", "reader", "duckdb", "duckdb-shapes"])
def test_each_way_reads_every_event(tmp_path: Path, how: str) -> None:
    config = dataclasses.replace(LOOKBACK, steps=6, restarts=0, retries=0, flush_every=1)
    run = synthesize(tmp_path / "run", config)
    floor = _floor()
    files = sorted(str(p) for p in run.run_dir.glob("events/*/*.parquet"))
    assert len(files) > 6  # one segment per flush, of several shapes
    given = floor.by_schema(files) if how == "duckdb-shapes" else files
    assert floor.read_all(given, how) == run.events
