"""A live run's writers, driven line by line from a parent test: each ``step`` command logs
one step and flushes (the trainer and the driver roll every ``ROLL`` flushes), ``finish``
ends the run (a clean close: each writer rolls its tail).

``python -m tests.eventlog.live_roll_child RUN_DIR``; each command is answered with one
line once it is durable: ``ok <trainer's last durable seq>``. The parent orders its reads
between the commands, so a roll falls between a reader's listing and its reading without
any timing.
"""

from __future__ import annotations

import sys

from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions, step_context

ROLL = 2


def main() -> None:
    options = WriterOptions(fsync=False, roll_segments=ROLL, flush_interval_s=3600)
    run = RunLog.start(sys.argv[1], buffer_size=8, options=options)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    step = 0
    for line in sys.stdin:
        command = line.strip()
        if command == "step":
            with step_context(step, 0):
                trainer.log(Metric(values={"loss": 1.0 / (step + 1)}))
            run.flush()
            step += 1
        elif command == "finish":
            run.finish()
        else:
            raise SystemExit(f"unknown command {command!r}")
        print(f"ok {trainer.last_durable_seq}", flush=True)
        if command == "finish":
            return


if __name__ == "__main__":
    main()
