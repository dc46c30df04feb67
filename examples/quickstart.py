"""Write a small run's events from a training-like loop, then query them with SQL.

Run: ``make demo`` (or ``.venv/bin/python examples/quickstart.py [RUN_DIR]``).
"""

from __future__ import annotations

import math
import sys
import tempfile

import ftaudit
from ftaudit.eventlog import (
    CellOutcome,
    Driver,
    IntRuns,
    Metric,
    RankOutcome,
    RunLog,
    StepEnd,
    Trainer,
    WitnessAllocated,
    step_context,
)


def main(run_dir: str) -> None:
    run = RunLog.start(run_dir, buffer_size=1024, dataset_size=10_000, deterministic_order=True)
    driver = run.writer(Driver())
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    counter = 0
    for step in range(5):
        with step_context(step, attempt=0):
            driver.log(
                WitnessAllocated(
                    num_ids=32,
                    counter_after=counter + 32,
                    witness_ids=IntRuns.arc(counter, 32, 1024),
                    sample_indices=IntRuns.arc(step * 32, 32, 10_000),
                    stale_ids=IntRuns(),
                )
            )
            counter += 32
            loss = 2.0 * math.exp(-step / 3)
            trainer.log(
                Metric(values={"loss": loss, "grad_norm": float("nan") if step == 3 else 1.0})
            )
            driver.log(
                StepEnd(accepted_attempt=0, cells={0: CellOutcome(ranks=[RankOutcome.NORMAL])})
            )
        if step == 2:
            run.record_checkpoint(step, path=f"{run_dir}/ckpt-{step}")
    run.finish()

    con = ftaudit.connect(run_dir)
    print(con.sql("SELECT type, count(*) AS n FROM events GROUP BY type ORDER BY type"))
    print(con.sql("SELECT step, name, value FROM metrics ORDER BY step, name"))
    print(con.sql("SELECT iteration, incarnation, writer, last_seq FROM checkpoint_snapshots"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="ftaudit-quickstart-"))
