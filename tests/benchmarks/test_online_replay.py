"""The online replay benchmark runs end to end at a tiny size, against a baseline too (no
timing asserted: every replayed poll judged steps, and both versions judged the same)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_online_replay_runs_at_a_tiny_size(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    args = ["--steps", "40", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--attach", "20", "--every", "5", "--rounds", "1", "--out", str(tmp_path)]
    args += ["--baseline", str(ROOT / "src")]  # the same code as its own baseline
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "online_replay.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "current / baseline:" in done.stdout, done.stdout
    (result,) = json.loads((tmp_path / "online_replay.json").read_text())["rounds"]
    assert set(result) == {"baseline", "current"}
    for version in result.values():
        assert len(version["cpu_s"]) == 3  # polls at steps 25, 30 and 35
        assert version["judged_steps"] >= 15
    assert result["baseline"]["judged_steps"] == result["current"]["judged_steps"]
