"""The whole-run follower benchmark runs end to end at a tiny size (no timing asserted:
every stretch has polls that judged steps, and each poll's thread CPU is part of its
process CPU)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import run_benchmark


def test_online_follow_runs_at_a_tiny_size(tmp_path: Path) -> None:
    args = ["--steps", "40", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--every", "5", "--start", "10", "--stretch", "10", "--out", str(tmp_path)]
    run_benchmark("online_follow.py", args)
    result = json.loads((tmp_path / "online_follow.json").read_text())
    assert [(s["from"], s["to"]) for s in result["stretches"]] == [(10, 20), (20, 30), (30, 40)]
    assert all(s["polls"] == 2 for s in result["stretches"])  # polls at 10 and 15, ...
    polls = result["polls"]
    assert sum(p["judged_steps"] for p in polls) >= 25
    assert all(0 <= p["thread_s"] <= p["process_s"] + 0.01 for p in polls)
