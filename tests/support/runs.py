"""Ready-made runs, written with the one run builder (:mod:`tests.support.builder`).

:func:`write_run` is the small fault-free run that the CLI, security and reliability
tests read: one driver, two cells of one trainer rank each, a head and a tail witness
instance, four samples a step, every step accepted at attempt 0, and a checkpoint at
the last step. With ``drop_id_at_step`` one snapshot misses one sample: the run FT004
fails.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.builder import RunBuilder

INSTANCES = ("pp0_chunk0.head", "pp0_chunk0.tail")
STEPS = 4
PER_STEP = 4


def write_run(run_dir: Path, *, drop_id_at_step: int | None = None) -> Path:
    """Write a complete, finished run. With ``drop_id_at_step``, cell 0's head snapshot
    of that step misses the step's first sample (a lost sample)."""
    builder = RunBuilder(run_dir, B=20, cells=2)
    run = builder.start(deterministic_order=True, dataset_size=STEPS * PER_STEP)
    for step in range(STEPS):
        samples = list(range(step * PER_STEP, (step + 1) * PER_STEP))
        lost = {(0, INSTANCES[0]): samples[:1]} if step == drop_id_at_step else None
        run.train(step, samples, instances=INSTANCES, unseen=lost)
        for cell in range(builder.cells):  # the replicas agree (FT006)
            run.checksum(step, cell, {"layer.weight": f"w{step}", "witness.head": f"h{step}"})
    run.flush()
    run.checkpoint(STEPS - 1)
    run.finish()
    builder.close()
    return run_dir
