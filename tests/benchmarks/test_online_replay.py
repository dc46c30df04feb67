"""The online replay benchmark runs end to end at a tiny size, against a baseline too (no
timing asserted: every replayed poll judged steps, and both versions judged the same)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import ROOT, run_benchmark


def test_online_replay_runs_at_a_tiny_size(tmp_path: Path) -> None:
    args = ["--steps", "60", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--attach", "20,40", "--every", "5", "--polls", "3", "--rounds", "1"]
    args += ["--out", str(tmp_path), "--baseline", str(ROOT / "src")]  # itself as baseline
    done = run_benchmark("online_replay.py", args)
    assert "step 40: current / baseline" in done.stdout, done.stdout
    assert "current: step 40 / step 20" in done.stdout, done.stdout
    (result,) = json.loads((tmp_path / "online_replay.json").read_text())["rounds"]
    assert set(result) == {"20", "40"}
    for point in result.values():
        assert set(point) == {"baseline", "current"}
        for version in point.values():
            assert len(version["cpu_s"]) == 3  # polls 5, 10 and 15 steps after attaching
            assert version["judged_steps"] >= 15
        assert point["baseline"]["judged_steps"] == point["current"]["judged_steps"]
