"""``ftaudit compact`` killed at points spread over its whole work loses or duplicates nothing.

A child process compacts a copy of a run and ``os._exit``s at its N-th Python function
call (deterministic for one input, so the points spread from the first listing to the
last unlink: inside the staging write, between the rename and the removals, ...). After
each kill the run must hold exactly the events it held before, each once, and verify the
same; a second compaction then finishes the work, again with the same events and verdict.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit.eventlog.compact import compact_run
from tests.reliability.disk_deaths import KILLED
from tests.support.cli import Invoke
from tests.support.small_segments import (
    events as _events,
)
from tests.support.small_segments import (
    segment_files as _segments,
)
from tests.support.small_segments import (
    verdict as _verdict,
)
from tests.support.small_segments import (
    write_small_segments,
)

ROOT = Path(__file__).resolve().parents[2]
FRACTIONS = (0.05, 0.3, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)


def _child(run: Path, die_at: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    return subprocess.run(
        [sys.executable, "-m", "tests.reliability.compact_child", str(run), str(die_at)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
    )


@pytest.mark.slow
def test_a_killed_compaction_never_loses_or_duplicates_an_event(
    ftaudit: Invoke, tmp_path: Path
) -> None:
    base = write_small_segments(tmp_path / "base", steps=30)
    events, verdict = _events(base), _verdict(ftaudit, base)
    full = tmp_path / "full"
    shutil.copytree(base, full)
    done = _child(full, 0)
    assert done.returncode == 0, done.stderr
    total = int(done.stdout.split()[-1])
    assert _events(full) == events and _verdict(ftaudit, full) == verdict
    cut_short = 0
    for fraction in FRACTIONS:
        run = tmp_path / f"kill-{fraction}"
        shutil.copytree(base, run)
        killed = _child(run, max(1, int(total * fraction)))
        assert killed.returncode == KILLED, killed.stderr
        cut_short += len(_segments(run)) not in (len(_segments(base)), len(_segments(full)))
        assert _events(run) == events, f"killed at {fraction} of the work"
        assert _verdict(ftaudit, run) == verdict, f"killed at {fraction} of the work"
        compact_run(run, target_rows=40)  # the next compaction finishes the work
        assert _events(run) == events
        assert sorted(p.name for p in _segments(run)) == sorted(p.name for p in _segments(full))
        assert _verdict(ftaudit, run) == verdict
    assert cut_short >= 4  # kills landed mid-way, between merges, not only before or after
