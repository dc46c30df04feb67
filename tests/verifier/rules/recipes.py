"""Runs that the cases of several rules build (each rule's own are in its ``ftNNN_cases.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from ftaudit.eventlog import (
    CheckpointRef,
    ChecksumWhen,
    StepApplied,
    WitnessGradient,
)
from tests.support.builder import (
    DISCARDED,
    NORMAL,
    Incarnation,
    RunBuilder,
    runs,
)
from tests.verifier.rules.case import Build


def threes(step: int) -> list[int]:
    """The samples of ``step`` when every step trains three: ``3 step .. 3 step + 2``."""
    return [3 * step, 3 * step + 1, 3 * step + 2]


def crashed_after_step_2(b: RunBuilder) -> Incarnation:
    """Steps 0..2 of three samples each, checkpoint 1 saved, then the job dies (its log
    closed unfinished): what a restart resumes from."""
    run = b.start()
    for step in range(3):
        run.train(step, threes(step))
        if step == 1:
            run.checkpoint(1)
    run.log.close()
    return run


def restart_ok(b: RunBuilder) -> None:
    """:func:`crashed_after_step_2`; the restart resumes from 1 and trains 2..4."""
    crashed_after_step_2(b)
    again = b.start(resume_from=1)
    for step in range(2, 5):
        again.train(step, threes(step))
    again.finish()


def clean_run(b: RunBuilder, steps: int, *, flush: bool = False) -> None:
    """A clean run of ``steps`` steps of three samples each; with ``flush`` one flush (one
    segment per writer) a step."""
    run = b.start()
    for step in range(steps):
        run.train(step, threes(step))
        if flush:
            run.flush()
    run.finish()


def three_steps(b: RunBuilder) -> None:
    """:func:`clean_run` of three steps, one segment per writer a step."""
    clean_run(b, 3, flush=True)


def warm_ring(b: RunBuilder, steps: int = 5) -> object:
    """Steps 0..steps-1 of 4 samples each: the ring has wrapped once at step 5."""
    run = b.start()
    for step in range(steps):
        run.train(step, range(4 * step, 4 * step + 4))
    return run


def retried(attempts: int, *, clear: bool, samples: int = 4) -> Build:
    """Step 5 on a wrapped ring, retried until attempt ``attempts - 1`` (cell 1 discards);
    ``clear``: each discard zeroes its stale slots, as ``TrainerHooks.after_discard`` does."""

    def build(b: RunBuilder) -> None:
        run = warm_ring(b)
        first = 20
        for attempt in range(attempts - 1):
            run.train(
                5,
                range(first, first + samples),
                attempt=attempt,
                cells={0: NORMAL, 1: DISCARDED},
                clear_on_discard=clear,
            )
        run.train(5, range(first, first + samples), attempt=attempts - 1)
        run.train(6, range(first + samples, first + 2 * samples))
        run.finish()

    return build


CKPT1 = CheckpointRef(iteration=1, incarnation=0)


def hooked_step(
    run: Incarnation, step: int, *, counter: int, grad_extra: Sequence[int] = ()
) -> None:
    """A step as the hooks log it: allocation, witness gradient, snapshot, counters."""
    samples = threes(step)
    ids = run.alloc(step, samples)
    for cell in range(run.builder.cells):
        run.trainer(cell).log(
            WitnessGradient(
                step=step,
                attempt=0,
                cell=cell,
                rank=0,
                instance="chunk0.head",
                nonzero_ids=runs([*ids, *grad_extra]),
            )
        )
        run.snapshot(step, ids, cell=cell)
        run.trainer(cell).log(
            StepApplied(step=step, attempt=0, cell=cell, rank=0, counters={"optimizer": counter})
        )
    run.step_end(step)


def hooked_resume_from_1(b: RunBuilder, *, restored: bool = True) -> Incarnation:
    """Hooked steps 0..2 with checkpoint 1 saved (and its ``at_save`` checksum), a crash,
    and the incarnation that resumes from 1: it logs the ``after_load`` checksum unless
    ``restored`` is False (no restore evidence)."""
    run = b.start()
    for step in range(3):
        hooked_step(run, step, counter=step + 1)
        if step == 1:
            run.checksum(1, 0, {"w": "s1"}, when=ChecksumWhen.AT_SAVE, checkpoint=CKPT1)
            run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1, restore_evidence=False)
    if restored:
        again.checksum(1, 0, {"w": "s1"}, when=ChecksumWhen.AFTER_LOAD, checkpoint=CKPT1)
    return again
