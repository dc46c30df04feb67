"""A trainer process of the concurrency test (imported by the forkserver)."""

from __future__ import annotations

from multiprocessing.synchronize import Barrier

from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions


def train(run_dir: str, cell: int, events: int, start: Barrier) -> None:
    """Attach to incarnation 0 and log ``events`` metrics ``{"i": seq}``, then close.

    Writers differ in how they flush: even cells by the background flusher alone (at
    1,000 to 8,000 rows), odd cells also explicitly every 5,000 events; every third one
    fsyncs. All start at once.
    """
    options = WriterOptions(
        fsync=cell % 3 == 0, flush_rows=1000 * (1 + cell % 8), flush_interval_s=0.05
    )
    run = RunLog.attach(run_dir, 0, options)
    writer = run.writer(Trainer(cell_index=cell, rank_within_cell=0))
    start.wait()
    for i in range(events):
        writer.log(Metric(step=i // 100, attempt=0, values={"i": float(i)}))
        if cell % 2 and i % 5000 == 4999:
            writer.flush()
    run.close()
