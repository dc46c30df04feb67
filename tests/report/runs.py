"""Realistic runs for the report tests, written through the public event API.

:func:`write_faulty_run` is a two-cell run with everything a picture must show: a crash
(cell 1 killed by an injected fault) with a discard, so the step is retried; a heal of the
dead cell from its peer; checkpoints; a driver crash mid-step; and a restart that resumes
from an earlier checkpoint, so one committed step of the first incarnation is rolled back.
:func:`write_clean_run` trains the same samples without any fault. Both log the same
per-cell metrics for the same step, so their committed histories must compare equal.
"""

from __future__ import annotations

import math
from pathlib import Path

from ftaudit.eventlog import CellReconfigured, ChecksumWhen, FaultInjected, FaultMode, Metric
from tests.support.builder import DISCARDED, ERRORED, NORMAL, Incarnation, RunBuilder

B = 40
CELLS = 2
PER_STEP = 4
STEPS = 8


def samples(step: int) -> list[int]:
    return list(range(step * PER_STEP, (step + 1) * PER_STEP))


def loss_at(step: int) -> float:
    """The global loss of a correct run at ``step``."""
    return 2.0 / (1.0 + step)


def log_metrics(
    inc: Incarnation, step: int, attempt: int, cells: list[int], value: float | None = None
) -> None:
    """Each cell logs its share of the global batch: the loss normalised by the global
    batch size and its sample count, so the values of a step SUM to the global ones
    (like the demo's cells). ``value`` replaces the global loss."""
    loss = loss_at(step) if value is None else value
    for cell in cells:
        inc.trainer(cell).log(
            Metric(
                step=step,
                attempt=attempt,
                values={"loss": loss / len(cells), "samples": PER_STEP / len(cells)},
            )
        )


def reconfigure(inc: Incarnation, step: int, alive: list[int], **heal: object) -> None:
    inc.driver.log(
        CellReconfigured(step=step, attempt=0, quorum_id=step + 1, alive_cells=alive, **heal)
    )


def write_clean_run(root: Path, *, steps: int = STEPS, diverge_at: int | None = None) -> Path:
    """A fault-free run; with ``diverge_at`` its loss drifts from that step on (a bug)."""
    b = RunBuilder(root, B=B, cells=CELLS)
    inc = b.start(deterministic_order=True, dataset_size=steps * PER_STEP)
    reconfigure(inc, 0, [0, 1])
    for step in range(steps):
        inc.train(step, samples(step))
        drift = 0.0 if diverge_at is None or step < diverge_at else 0.05 * (step - diverge_at + 1)
        log_metrics(inc, step, 0, [0, 1], loss_at(step) + drift)
        if step % 2 == 1:
            inc.checkpoint(step)
    inc.finish()
    b.close()
    return root


def write_faulty_run(
    root: Path, *, nan_at: int | None = None, lose_sample_at: int | None = None
) -> Path:
    """The same training with faults, retries, a heal and a restart (see the module doc).

    ``nan_at`` makes the committed loss of that step NaN (a metric gone bad);
    ``lose_sample_at`` (a step of incarnation 1) drops the previous step's first sample
    from cell 1's weights before that step, so FT004 reports it missing there."""
    b = RunBuilder(root, B=B, cells=CELLS)
    size = STEPS * PER_STEP
    inc0 = b.start(deterministic_order=True, dataset_size=size)
    reconfigure(inc0, 0, [0, 1])
    for step in (0, 1):
        inc0.train(step, samples(step))
        log_metrics(inc0, step, 0, [0, 1])
    inc0.checkpoint(1)
    # step 2: cell 1 is killed, cell 0 discards; the retry runs on cell 0 alone
    inc0.driver.log(
        FaultInjected(step=2, attempt=0, mode=FaultMode.SIGKILL, target="cell 1", cell=1, rank=0)
    )
    inc0.train(2, samples(2), cells={0: DISCARDED, 1: ERRORED})
    log_metrics(inc0, 2, 0, [0], math.nan)
    reconfigure(inc0, 2, [0])
    inc0.train(2, samples(2), attempt=1, cells={0: NORMAL})
    log_metrics(inc0, 2, 1, [0])  # one cell trained the whole batch
    # step 3: cell 1 is replaced and healed from cell 0
    inc0.weights[1] = set(inc0.weights[0])
    reconfigure(inc0, 3, [0, 1], heal_source=0, healed_cells=[1])
    for cell in (0, 1):  # the source gave, the healed cell received, the same state
        inc0.checksum(3, cell, {"w": "w2"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    inc0.train(3, samples(3))
    log_metrics(inc0, 3, 0, [0, 1])
    inc0.checkpoint(3)
    inc0.train(4, samples(4))
    log_metrics(inc0, 4, 0, [0, 1], loss_at(4) + 0.2)  # rolled back: drawn faint
    # step 5: the driver is killed mid-step; checkpoint 5 was never written
    inc0.alloc(5, samples(5))
    inc0.driver.log(FaultInjected(step=5, attempt=0, mode=FaultMode.SIGKILL, target="driver"))
    log_metrics(inc0, 5, 0, [0, 1], loss_at(5) + 0.3)
    inc0.flush()
    inc0.log.close()
    # incarnation 1 resumes from checkpoint 3 and finishes the run
    inc1 = b.start(resume_from=3, deterministic_order=True, dataset_size=size)
    reconfigure(inc1, 4, [0, 1])
    last_ids: list[int] = []
    for step in range(4, STEPS):
        if step == lose_sample_at:
            inc1.weights[1].discard(last_ids[0])  # a gradient that never reached cell 1
        last_ids = inc1.train(step, samples(step))
        log_metrics(inc1, step, 0, [0, 1], math.nan if step == nan_at else None)
        if step % 2 == 1:
            inc1.checkpoint(step)
    inc1.finish()
    b.close()
    return root
