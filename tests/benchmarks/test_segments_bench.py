"""The many-segments benchmark script runs end to end at a tiny size (no timing asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.processes import run_benchmark


@pytest.mark.slow
def test_segments_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    args = ["--steps", "40", "--few-every", "20", "--roll-segments", "8", "--json", str(out)]
    run_benchmark("segments_bench.py", [*args, "--md", str(tmp_path / "bench.md")])
    cases = json.loads(out.read_text())["cases"]
    assert list(cases) == ["few", "many", "rolled", "compacted"]
    assert cases["many"]["segments"] > cases["few"]["segments"]
    # a clean close rolls each writer's tail and removes every original it covers
    assert cases["rolled"]["segments"] == cases["rolled"]["files"] < cases["many"]["segments"]
    assert cases["compacted"]["segments"] < cases["many"]["segments"]
    assert all(c["verify"]["code"] == 0 for c in cases.values())
    assert "CPU vs few" in (tmp_path / "bench.md").read_text()
