"""Writers killed at random points (SIGKILL, os._exit, SIGSEGV) lose exactly their unflushed tail.

The checks are in :mod:`tests.reliability.crash_torture`; the 1,000-trial run is
``benchmarks/torture/crash_torture.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.crash_torture import MODES, run_torture


def test_a_few_deaths_of_each_kind(tmp_path: Path) -> None:
    stats = run_torture(tmp_path / "run", 6, seed=7)
    assert stats.trials == 6
    assert stats.deaths == {mode: 2 for mode in MODES}
    assert stats.ft001_other == 0


@pytest.mark.slow
@pytest.mark.timeout(900)  # a hang guard: 100 launches take 90 s alone, 300+ s at load 15-21
def test_one_hundred_deaths_at_random_points(tmp_path: Path) -> None:
    stats = run_torture(tmp_path / "run", 100, seed=20240601)
    print(stats.summary())
    assert stats.deaths == {"sigkill": 34, "exit": 33, "segv": 33}
    # the deaths really landed everywhere, flushes included, and left temp files behind
    assert stats.phases["inside a flush"] >= 5, stats.summary()
    assert stats.phases["between flushes"] >= 1, stats.summary()
    assert stats.phases["in RunLog.start"] >= 5, stats.summary()
    assert stats.temp_complete + stats.temp_partial >= 3, stats.summary()
    assert stats.ft001_truncated_tail == stats.temp_complete + stats.temp_partial
    assert stats.ft001_other == 0
    assert stats.events_sealed > 10_000
