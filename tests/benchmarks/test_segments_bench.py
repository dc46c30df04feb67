"""The many-segments benchmark script runs end to end at a tiny size (no timing asserted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_segments_bench_runs_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "segments_bench.py"),
            "--steps",
            "40",
            "--few-every",
            "20",
            "--roll-segments",
            "8",
            "--json",
            str(out),
            "--md",
            str(tmp_path / "bench.md"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    cases = json.loads(out.read_text())["cases"]
    assert list(cases) == ["few", "many", "rolled", "compacted"]
    assert cases["many"]["segments"] > cases["few"]["segments"]
    # a clean close rolls each writer's tail and removes every original it covers
    assert cases["rolled"]["segments"] == cases["rolled"]["files"] < cases["many"]["segments"]
    assert cases["compacted"]["segments"] < cases["many"]["segments"]
    assert all(c["verify"]["code"] == 0 for c in cases.values())
    assert "CPU vs few" in (tmp_path / "bench.md").read_text()
