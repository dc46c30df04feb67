"""Threads sharing a writer and processes with their own writers lose nothing."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter
from pathlib import Path

import pytest

from ftaudit.eventlog import EventWriter, Metric, Trainer, WriterOptions, read_records
from tests.eventlog.writer_child import write_n

THREADS = 8
PER_THREAD = 5_000
PROCESSES = 4
PER_PROCESS = 20_000


def test_eight_threads_share_one_writer_without_loss(tmp_path: Path):
    writer = EventWriter(
        tmp_path,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="t",
        incarnation=0,
        options=WriterOptions(fsync=False, flush_rows=1_000, flush_interval_s=0.01),
    )
    start = threading.Barrier(THREADS)

    def work(thread: int) -> None:
        start.wait()
        for i in range(PER_THREAD):
            writer.log(Metric(step=i, attempt=thread, values={"t": float(thread)}))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.close()
    records = read_records(tmp_path)
    assert sorted(r.envelope.seq for r in records) == list(range(THREADS * PER_THREAD))
    per_thread = Counter(r.event.attempt for r in records)
    assert per_thread == {t: PER_THREAD for t in range(THREADS)}
    assert writer.stats.segments_written > 1  # the background flusher really ran


@pytest.mark.timeout(120)
def test_four_processes_write_at_once_without_loss(tmp_path: Path):
    ctx = multiprocessing.get_context("forkserver")
    procs = [
        ctx.Process(target=write_n, args=(str(tmp_path), cell, PER_PROCESS))
        for cell in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    records = read_records(tmp_path)
    writers = Counter(r.envelope.writer for r in records)
    assert len(writers) == PROCESSES
    for writer_id in writers:
        seqs = [r.envelope.seq for r in records if r.envelope.writer == writer_id]
        assert sorted(seqs) == list(range(PER_PROCESS))
