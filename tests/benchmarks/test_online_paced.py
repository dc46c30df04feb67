"""The paced online benchmark runs end to end at a tiny size (no timing asserted: every
share's follower judged steps, and the share it took is within its share, which the
pacing guarantees whatever the polls cost: each poll runs only once the one before it
is paid for)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.processes import run_benchmark


def test_online_paced_runs_at_a_tiny_size(tmp_path: Path) -> None:
    args = ["--steps", "50", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--attach", "10", "--polls", "30", "--shares", "0.05,1", "--out", str(tmp_path)]
    done = run_benchmark("online_paced.py", args)
    assert "| 5.0% |" in done.stdout and "| 100.0% |" in done.stdout, done.stdout
    shares = json.loads((tmp_path / "online_paced.json").read_text())["shares"]
    assert set(shares) == {"0.05", "1.0"}
    for share, found in shares.items():
        assert found["cpu_s"], share  # it polled
        assert 0 < found["judged_steps"] <= 30
        assert len(found["waited_steps"]) == found["judged_steps"]
        assert sum(found["cpu_s"]) <= float(share) * found["replayed_s"] + 1e-9
