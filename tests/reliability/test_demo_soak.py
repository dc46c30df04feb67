"""The demo soak's schedules, and a short soak run in CI (the 20 seeds run by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.online_agreement import following
from tests.support.processes import load_benchmark


def _soak() -> ModuleType:
    return load_benchmark("torture/demo_soak.py")


def test_the_twenty_seeds_cover_every_job_kill_scenario_and_long_retries() -> None:
    soak = _soak()
    plans = [soak.schedule(seed, steps=12, cells=3, rate=0.5) for seed in range(20)]
    kills = [[f for f in p["faults"] if f.get("target") == "driver"] for p in plans]
    assert sum(1 for k in kills if len(k) == 2) >= 8  # first-step and twice, 4 seeds each
    before = [k for k in kills if len(k) == 1 and k[0]["step"] < 2]
    assert len(before) >= 4  # killed before checkpoint 2 exists
    first_step = [
        k for k in kills if len(k) == 2 and k[1]["step"] == soak.resume_step(k[0]["step"])
    ]
    assert len(first_step) >= 4
    assert all(k[1]["incarnation"] == 1 for k in kills if len(k) == 2)
    longest = [max((d.get("attempt", 0) for d in p["discards"]), default=0) for p in plans]
    assert sum(1 for a in longest if a >= 1) == 10  # 3+ attempts of one step in half the seeds


@pytest.mark.slow
def test_a_short_soak_verifies(tmp_path: Path) -> None:
    """Seed 2, shortened: a step retried 3+ times, a job kill, then another in the resumed
    incarnation's first step, and cell faults; ``ftaudit demo`` must verify, and a follower
    of the live run agree with the offline verdict."""
    soak = _soak()
    plan = soak.schedule(2, steps=8, cells=2, rate=0.5)
    kills = [f for f in plan["faults"] if f.get("target") == "driver"]
    assert len(kills) == 2 and kills[1]["step"] == soak.resume_step(kills[0]["step"])
    retried = [d for d in plan["discards"] if d.get("attempt", 0) >= 1]
    assert retried and retried[0]["incarnation"] == 2  # 3+ attempts in the last incarnation
    env = {**os.environ, "NO_COLOR": "1"}
    cmd = [
        str(Path(sys.executable).with_name("ftaudit")),
        "demo",
        str(tmp_path / "run"),
        "--seed",
        "2",
        "--cells",
        "2",
        "--steps",
        "8",
        "--faults",
        json.dumps(plan),
    ]
    with following(tmp_path / "run"):
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=1200, env=env, check=False
        )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[incarnation 2]" in done.stderr
