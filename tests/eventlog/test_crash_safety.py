"""A writer killed with SIGKILL at random points loses exactly its unflushed tail."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ftaudit.eventlog import read_records, scan_run
from tests.eventlog.writer_child import write_until_killed

KILLS = 60


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.eventlog.writer_child"])
    return ctx


def _lines(progress: Path) -> int:
    """Lines the child has written to its progress file: its writer id, then one per flush."""
    try:
        return len(progress.read_text().split())
    except FileNotFoundError:
        return 0


def test_sigkill_at_random_points_loses_only_the_unflushed_tail(tmp_path: Path, forkserver):
    rng = random.Random(1234)
    run_dir = tmp_path / "run"
    promised: dict[str, int] = {}
    for trial in range(KILLS):
        progress = tmp_path / f"progress-{trial}"
        proc = forkserver.Process(
            target=write_until_killed, args=(str(run_dir), str(progress), trial)
        )
        proc.start()
        # Wait for a random number of the child's flushes (counted, not timed, so a loaded
        # machine changes nothing), then kill it a random while later: before its first
        # flush, between flushes or in the middle of one.
        flushes = rng.randint(0, 3)
        deadline = time.monotonic() + 120  # generous: a loaded machine starts children slowly
        while _lines(progress) < 1 + flushes and time.monotonic() < deadline:
            time.sleep(0.002)
        assert _lines(progress) >= 1 + flushes, "the writer child never got that far"
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL
        lines = progress.read_text().split()
        promised[lines[0]] = max([int(x) for x in lines[1:]], default=-1)

    scan = scan_run(run_dir)  # every visible segment has a valid footer
    by_writer: dict[str, list[int]] = defaultdict(list)
    for record in read_records(run_dir):  # and every row of every segment reads back
        by_writer[record.envelope.writer].append(record.envelope.seq)
        assert record.event.values["i"] == float(record.envelope.seq)
        assert record.event.step == record.envelope.seq

    assert len(promised) == KILLS  # each successor got its own writer id
    for writer_id, durable in promised.items():
        seqs = sorted(by_writer.get(writer_id, []))
        # a prefix without holes, covering at least everything the writer called durable
        assert seqs == list(range(len(seqs))), writer_id
        assert len(seqs) - 1 >= durable, (writer_id, len(seqs), durable)
    # some kills should land mid-flush and leave a temp file, which readers never see
    assert all(p.name.startswith(".") for p in scan.torn)
