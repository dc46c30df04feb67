"""Code that runs in child processes of the event log tests (imported by forkserver)."""

from __future__ import annotations

import os
import random
from pathlib import Path

from ftaudit.eventlog import EventWriter, Metric, Trainer, WriterOptions


def write_until_killed(run_dir: str, progress: str, seed: int) -> None:
    """Log numbered metrics in random-sized bursts, flushing after each burst.

    After each flush the child appends the last durable sequence number to ``progress``:
    the parent kills it at a random moment and checks that at least that much survived.
    """
    rng = random.Random(seed)
    writer = EventWriter(
        run_dir,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="crash",
        incarnation=0,
        options=WriterOptions(fsync=True, flush_rows=1 << 30, flush_interval_s=3600),
    )
    Path(progress).write_text(writer.writer_id + "\n")
    fd = os.open(progress, os.O_WRONLY | os.O_APPEND)
    i = 0
    while True:
        for _ in range(rng.randint(1, 300)):
            if i % 2:  # as field values (the hooks' way) and as objects, one sequence
                writer.log_fields(Metric, {"i": float(i)}, step=i, attempt=0)
            else:
                writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
            i += 1
        durable = writer.flush()
        os.write(fd, f"{durable}\n".encode())


def write_n(run_dir: str, cell: int, n: int) -> None:
    """Log ``n`` metrics from a fresh writer and close it."""
    with EventWriter(
        run_dir,
        Trainer(cell_index=cell, rank_within_cell=0),
        run_id="conc",
        incarnation=0,
        options=WriterOptions(fsync=False, flush_rows=997),
    ) as writer:
        for i in range(n):
            writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
