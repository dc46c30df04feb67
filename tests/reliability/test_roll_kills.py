"""A writer killed while it flushes or rolls its segments never loses what was durable.

A child process writes a run whose trainer flushes every step and rolls every 5 segments
(fsync on), and ``os._exit``s at its N-th disk call, the points spread from the first
flush to the last roll's removals: inside a flush, inside a roll's staging write, between
a roll's rename and the removal of the previous roll's originals. After each kill the
trainer's events are exactly seq 0..M, each once, with M at least the last sequence
number a flush reported durable; FT001 passes (a flush cut short leaves a torn temp
file, a warning); ``ftaudit compact`` then leaves the same events and verdict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit.eventlog import list_segments, read_records
from ftaudit.eventlog.compact import compact_run
from tests.reliability.disk_deaths import KILLED
from tests.support.cli import Invoke

ROOT = Path(__file__).resolve().parents[2]
FRACTIONS = (0.1, 0.25, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.97)


def _child(run: Path, die_at: int, progress: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "tests.reliability.roll_child", *map(str, (run, die_at, progress))],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


def _trainer_seqs(run: Path) -> list[int]:
    return [r.envelope.seq for r in read_records(run) if r.envelope.writer.startswith("trainer")]


def _ft001(ftaudit: Invoke, run: Path) -> tuple[int, set[str]]:
    result = ftaudit("verify", run, "--rule", "FT001", "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    kinds = {v["kind"] for r in json.loads(result.stdout)["results"] for v in r["violations"]}
    return result.exit_code, kinds


@pytest.mark.slow
def test_a_killed_writer_never_loses_a_durable_event_to_a_roll(
    ftaudit: Invoke, tmp_path: Path
) -> None:
    full = tmp_path / "full"
    done = _child(full, 0, tmp_path / "full.progress")
    assert done.returncode == 0, done.stderr
    total = int(done.stdout.split()[-1])
    assert _trainer_seqs(full) == list(range(60))
    assert _ft001(ftaudit, full) == (0, set())
    mid_roll = 0
    for fraction in FRACTIONS:
        run, progress = tmp_path / f"kill-{fraction}", tmp_path / f"kill-{fraction}.progress"
        killed = _child(run, max(1, int(total * fraction)), progress)
        assert killed.returncode == KILLED, killed.stderr
        lines = progress.read_text().split() if progress.exists() else []
        durable = int(lines[-1]) if lines else -1
        seqs = _trainer_seqs(run)
        where = f"killed at {fraction} of the work (durable up to {durable})"
        assert seqs == list(range(len(seqs))) and len(seqs) - 1 >= durable, where
        code, kinds = _ft001(ftaudit, run)
        assert code == 0 and kinds <= {"torn_segment"}, (where, kinds)
        staged = list((run / "compacting").glob("*/*"))
        mid_roll += bool(staged) or bool(list_segments(run).covered)
        compact_run(run)
        assert _trainer_seqs(run) == seqs, where
        assert _ft001(ftaudit, run)[0] == 0, where
    assert mid_roll >= 3  # kills landed while rolls were under way or their originals left
