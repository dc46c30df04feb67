"""The whole-run follower benchmark runs end to end at a tiny size (no timing asserted:
every stretch has polls that judged steps, and each poll's thread CPU is part of its
process CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_online_follow_runs_at_a_tiny_size(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = ["--steps", "40", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--every", "5", "--start", "10", "--stretch", "10", "--out", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "online_follow.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "online_follow.json").read_text())
    assert [(s["from"], s["to"]) for s in result["stretches"]] == [(10, 20), (20, 30), (30, 40)]
    assert all(s["polls"] == 2 for s in result["stretches"])  # polls at 10 and 15, ...
    polls = result["polls"]
    assert sum(p["judged_steps"] for p in polls) >= 25
    assert all(0 <= p["thread_s"] <= p["process_s"] + 0.01 for p in polls)
