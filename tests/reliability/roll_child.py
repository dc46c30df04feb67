"""A child process that writes a run whose trainer rolls its segments, and dies at the N-th
disk call (``os._exit``).

``python -m tests.reliability.roll_child RUN_DIR N PROGRESS``: after each flush the child
appends the trainer's last durable sequence number to PROGRESS. N = 0 writes the whole
run and prints how many disk calls it made from its first step (opens, fsyncs, renames,
removals, folder creations: :mod:`tests.reliability.disk_deaths`), so the parent can
spread death points over flushes and rolls.
"""

from __future__ import annotations

import os
import sys

from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions, step_context
from tests.reliability.disk_deaths import DiskDeath

STEPS = 30
ROLL = 5


def main() -> None:
    run_dir, die_at, progress = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    fd = os.open(progress, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    options = WriterOptions(fsync=True, roll_segments=ROLL, flush_interval_s=3600)
    run = RunLog.start(run_dir, buffer_size=8, options=options)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    with DiskDeath(die_at) as death:  # counted from the first step: flushes and rolls
        for step in range(STEPS):
            with step_context(step, 0):
                trainer.log(Metric(values={"loss": 1.0 / (step + 1)}))
                trainer.log(Metric(values={"lr": 0.1}))
            os.write(fd, f"{trainer.flush()}\n".encode())
        run.finish()
    print(death.calls)


if __name__ == "__main__":
    main()
