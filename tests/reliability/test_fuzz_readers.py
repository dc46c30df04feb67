"""Damaged runs (hypothesis picks the damage): ``ft-verify`` exits 1 or 2, clearly, never 0.

The corruptions are in :mod:`tests.support.corrupt`; the 1,500-input run with its
figures is ``benchmarks/torture/fuzz_readers.py``.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.corrupt import CORRUPTIONS, Verdict, damage_copy, verdict
from tests.support.runs import write_run

KINDS = sorted(CORRUPTIONS)
SEEN: Counter[tuple[str, int]] = Counter()


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = write_run(tmp_path_factory.mktemp("fuzz") / "base")
    with pytest.raises(AssertionError, match="must exit 1 or 2"):
        verdict(run)  # the undamaged run verifies (exit 0): every failure below is the damage
    return run


def _fuzz(base: Path, kind: str, rnd: random.Random) -> Verdict:
    _, result = damage_copy(base, kind, rnd)
    SEEN[(kind, result.code)] += 1
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1))
def test_damaged_runs_never_verify(base: Path, kind: str, seed: int) -> None:
    assert _fuzz(base, kind, random.Random(seed)).code in (1, 2)


@pytest.mark.slow
# A guard against a hang, not a speed limit: 500 examples took over 300 s at load 12-17.
@pytest.mark.timeout(1200)
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(KINDS), seed=st.integers(0, 2**32 - 1))
def test_five_hundred_damaged_runs_never_verify(base: Path, kind: str, seed: int) -> None:
    assert _fuzz(base, kind, random.Random(seed)).code in (1, 2)


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_damage_once(base: Path, kind: str) -> None:
    result = _fuzz(base, kind, random.Random(kind))
    tampering = {"edit_event", "edit_event_forged", "reorder_rows", "delete_middle"}
    if kind in tampering:  # the file still reads: the log-integrity rule must catch it
        assert result.code == 1 and result.message.startswith("FT001"), result
    if kind.startswith("symlink") or kind.startswith("duplicate") or kind == "truncate":
        assert result.code == 2, result
    if kind == "forged_id_range":  # validated on read: the segment and field are named
        assert result.code == 2 and "event at seq" in result.message, result


@pytest.mark.parametrize("kind", ["bitflip_anywhere", "symlink_events", "edit_event"])
def test_the_real_entry_point(base: Path, kind: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(base, run, symlinks=True)
    CORRUPTIONS[kind](run, random.Random(3))
    ft_verify = Path(sys.executable).with_name("ft-verify")
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run(
        [str(ft_verify), str(run)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode in (1, 2), done
    assert "Traceback" not in done.stdout + done.stderr
    if done.returncode == 2:
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    else:
        assert "FT001" in done.stdout and "fail" in done.stdout, done.stdout
