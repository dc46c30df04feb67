"""The online benchmark runs end to end at a tiny size with two poll intervals (no timing
asserted: each interval's polls judged that many steps, and the cost model is fitted where
it has two intervals), and its cost model recovers a known line."""

from __future__ import annotations

import json
import pstats
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.processes import load_benchmark, run_benchmark


def _online_bench() -> ModuleType:
    return load_benchmark("online_bench.py")


def test_online_bench_follows_each_interval_at_a_tiny_size(tmp_path: Path) -> None:
    args = ["--steps", "70", "--cells", "2", "--buffer-size", "4096", "--samples-per-step", "64"]
    args += ["--at", "10,20", "--every", "5,10", "--polls", "3", "--out", str(tmp_path)]
    args += ["--profile", str(tmp_path / "profiles")]
    done = run_benchmark("online_bench.py", args)
    assert "polling every 10: last / first sample point" in done.stdout, done.stdout
    summary = json.loads((tmp_path / "online_bench.json").read_text())["summary"]
    rows = {(p["every"], p["point"]): p for p in summary["points"]}
    assert set(rows) == {(5, 10), (5, 20), (10, 10), (10, 20)}
    for (every, _), row in rows.items():
        assert row["polls"] == 2  # the first of the 3 polls loads the window: reported apart
        assert row["steps_per_poll"] == every
    assert [m["point"] for m in summary["cost_model"]] == [10, 20]
    # one profile per follower, of its polls after attaching
    for every, point in rows:
        stats = pstats.Stats(str(tmp_path / "profiles" / f"poll_{point}_every_{every}.prof"))
        calls = stats.stats  # (file, line, function) -> (primitive calls, calls, ...)
        polled = [f for f in calls if f[2] == "poll" and f[0].endswith("online.py")]
        assert [calls[f][1] for f in polled] == [2]


def test_cost_model_recovers_a_fixed_and_a_per_step_part() -> None:
    # a poll costing 60 ms + 9 ms a judged step, polled every 10, 25 and 50 steps
    points = [
        {"point": 100, "steps_per_poll": n, "cpu_per_poll_s": 0.060 + 0.009 * n}
        for n in (10, 25, 50)
    ]
    points.append({"point": 200, "steps_per_poll": 10, "cpu_per_poll_s": 0.150})
    (model,) = _online_bench().cost_model(points, step_s=1.0)  # one interval: no fit at 200
    assert model["point"] == 100
    assert model["fixed_per_poll_s"] == pytest.approx(0.060)
    assert model["per_judged_step_s"] == pytest.approx(0.009)
    assert model["least_every_for_1_percent"] == 60  # 60 ms / (10 ms - 9 ms)
    slow = [{**p, "cpu_per_poll_s": 0.060 + 0.011 * p["steps_per_poll"]} for p in points[:3]]
    (over,) = _online_bench().cost_model(slow, step_s=1.0)
    assert over["least_every_for_1_percent"] is None  # a judged step alone costs over 1%
