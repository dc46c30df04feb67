"""Readers of a live run whose writers roll between the readers' listing and their reading.

A writer seals every ``ROLL`` small segments again as one merged segment and removes the
originals one roll later (at its clean close, all of them). A reader that listed the run
before two rolls finds listed originals gone: it lists the run again and reads the merged
segment, while a segment that vanished with nothing holding it is still a hole (FT001).
The writers are a real child process (:mod:`tests.eventlog.live_roll_child`), driven one
command at a time, so every roll falls between the reader's steps by order, not by time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ftaudit.errors import SegmentVanishedError
from ftaudit.eventlog import list_segments
from ftaudit.eventlog.reader import scan_run
from ftaudit.verifier.engine import verify
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.session import Session
from tests.eventlog.live_roll_child import ROLL

ROOT = Path(__file__).resolve().parents[2]


class LiveRun:
    """The child writing the run; each call returns once its command is durable."""

    def __init__(self, run: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
        self.run = run
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.eventlog.live_roll_child", str(run)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )

    def _say(self, command: str) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()  # blocks until durable; "" if the child died
        assert answer.startswith("ok "), f"child answered {answer!r} to {command}"
        return int(answer.split()[1])

    def steps(self, n: int) -> int:
        """Log and flush ``n`` steps; the trainer's last durable sequence number."""
        last = -1
        for _ in range(n):
            last = self._say("step")
        return last

    def finish(self) -> None:
        self._say("finish")
        assert self.proc.wait(timeout=120) == 0

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=120)  # closes the pipes


@pytest.fixture
def live(tmp_path: Path) -> Iterator[LiveRun]:
    child = LiveRun(tmp_path / "run")
    try:
        yield child
    finally:
        child.close()


def _gone(paths: list[Path]) -> list[Path]:
    return [p for p in paths if not p.exists()]


def _trainer_seqs(session: Session) -> list[int]:
    rows = session.rows(
        "SELECT seq FROM events WHERE writer LIKE 'trainer%' ORDER BY seq", label="trainer seqs"
    )
    return [r["seq"] for r in rows]


@pytest.mark.slow
def test_a_reader_whose_listing_two_rolls_made_stale_reads_the_merged_segments(
    live: LiveRun,
) -> None:
    live.steps(3)
    stale = list_segments(live.run)
    listed = [f.path for f in stale.files]
    last = live.steps(2 * ROLL)  # two rolls of each writer: the listed originals are removed
    assert _gone(listed), "the child's rolls should have removed a listed original"
    scan = scan_run(live.run, listing=stale)  # listed again, not "unreadable"
    assert not _gone([s.path for s in scan.segments])
    with Session.open(live.run, listing=stale) as session:
        assert _trainer_seqs(session) == list(range(last + 1))
        assert verify(session).passed(strict=True)
    # a caller's own selection is not re-made for it: it is told to select again
    checked = scan_run(live.run)
    live.steps(2 * ROLL)
    with pytest.raises(SegmentVanishedError):
        Session.open(live.run, scan=checked).close()
    live.finish()
    # a clean close rolled each writer's tail (a tail of one flush stays as it is) and
    # removed every original
    done = list_segments(live.run)
    assert not done.covered
    for files in done.writers.values():
        assert all(f.last_seq is not None for f in files[:-1]), [f.path.name for f in files]
    assert len(list(live.run.glob("events/*/*.parquet"))) == len(done)
    assert verify(live.run).passed(strict=True)


def test_a_segment_that_vanished_with_nothing_holding_it_is_a_hole(live: LiveRun) -> None:
    live.steps(2 * ROLL + 1)  # the trainer: two merged segments, the first's originals gone
    listing = list_segments(live.run)
    trainer = next(files for w, files in listing.writers.items() if w.startswith("trainer"))
    lost = trainer[0]  # with later segments: its loss is a hole, not a cut tail
    assert lost.last_seq is not None and not (lost.path.parent / "000000000000.parquet").exists()
    lost.path.unlink()
    report = verify(live.run)
    holes = [
        v for r in report.results for v in r.violations if r.code == "FT001" and v.kind == "hole"
    ]
    assert holes and holes[0].location.writer == lost.writer, report
    with Session.open(live.run, listing=listing) as session:  # re-listed: the hole remains
        assert lost.first_seq not in _trainer_seqs(session)


@pytest.mark.slow
def test_a_follower_keeps_no_footer_of_removed_segments(live: LiveRun) -> None:
    follower = OnlineVerifier(live.run)
    for _ in range(4):
        live.steps(ROLL + 1)
        follower.poll()
        listed = list_segments(live.run)
        # footers of the listed segments only: not of the originals the rolls removed
        assert 0 < follower.segments_seen <= len(listed)
    live.finish()
    final = follower.poll()
    assert final.finished and final.final is not None and final.final.passed(strict=True)
