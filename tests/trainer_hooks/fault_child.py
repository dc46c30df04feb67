"""A process that runs steps 0..3 of a trainer and fires its fault schedule (for test_faults).

Usage: fault_child.py RUN_DIR SCHEDULE_JSON CELL RANK
Prints ``step N`` before each step and ``survived`` at the end, flushing each line.
"""

from __future__ import annotations

import sys

from ftaudit.eventlog import RunLog, Trainer
from ftaudit.trainer_hooks import FaultInjector, FaultSchedule


def main() -> None:
    run_dir, schedule, cell, rank = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    run = RunLog.attach(run_dir, 0)
    writer = run.writer(Trainer(cell_index=cell, rank_within_cell=rank))
    injector = FaultInjector(FaultSchedule.from_json(schedule), writer, cell=cell, rank=rank)
    for step in range(4):
        print(f"step {step}", flush=True)
        injector.maybe_fire(step, 0)
    run.close()
    print("survived", flush=True)


if __name__ == "__main__":
    main()
