"""Cases of FT009-FT012 (issue 12: restore evidence, checkpoint state, application
counting, trainable-parameter manifest), as data."""

from __future__ import annotations

from collections.abc import Sequence

from ftaudit.eventlog import (
    CellReconfigured,
    ChecksumWhen,
    ParameterManifest,
    StateAdopted,
    StepApplied,
    WitnessGradient,
)
from ftaudit.eventlog.events import CheckpointRef
from tests.support.builder import Incarnation, RunBuilder, runs
from tests.verifier.cases import Case, Expect

CKPT1 = CheckpointRef(iteration=1, incarnation=0)


def _step(run: Incarnation, step: int, *, counter: int, grad_extra: Sequence[int] = ()) -> None:
    """A step as the hooks log it: allocation, witness gradient, snapshot, counters."""
    samples = [3 * step, 3 * step + 1, 3 * step + 2]
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


def _crash_after_checkpoint_1(b: RunBuilder, *, restored: bool = True) -> Incarnation:
    run = b.start()
    for step in range(3):
        _step(run, step, counter=step + 1)
        if step == 1:
            run.checksum(1, 0, {"w": "s1"}, when=ChecksumWhen.AT_SAVE, checkpoint=CKPT1)
            run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1, restore_evidence=False)
    if restored:
        again.checksum(1, 0, {"w": "s1"}, when=ChecksumWhen.AFTER_LOAD, checkpoint=CKPT1)
    return again


# -- FT009 ------------------------------------------------------------------------------
def resumed_and_restored(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b)
    _step(again, 2, counter=3)
    again.finish()


def resumed_without_reload(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b, restored=False)
    _step(again, 2, counter=3)
    again.finish()


def resumed_adopting_live_state(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b, restored=False)
    again.trainer(0).log(
        StateAdopted(step=1, cell=0, rank=0, reason="in-memory replica survived", checkpoint=CKPT1)
    )
    _step(again, 2, counter=3)
    again.finish()


def _healed(b: RunBuilder, *, evidence: bool) -> None:
    run = b.start()
    _step(run, 0, counter=1)
    run.driver.log(
        CellReconfigured(
            step=1, attempt=0, quorum_id=1, heal_source=0, healed_cells=[1], alive_cells=[0, 1]
        )
    )
    if evidence:
        run.checksum(1, 0, {"w": "a"}, when=ChecksumWhen.AFTER_HEAL)
        run.checksum(1, 1, {"w": "a"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    _step(run, 1, counter=2)
    run.finish()


def healed_with_evidence(b: RunBuilder) -> None:
    _healed(b, evidence=True)


def healed_without_evidence(b: RunBuilder) -> None:
    _healed(b, evidence=False)


def allocation_lost(b: RunBuilder) -> None:
    run = b.start()
    _step(run, 0, counter=1)
    run.flush()
    # step 1's allocation was buffered by the driver, handed out, and lost in a crash
    run.allocator.allocate(3)
    run.snapshot(1, [0, 1, 2, 3, 4, 5])
    run.log.close()


def receipt_outside_allocation(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [0, 1])
    run.advantage(0, [*ids, 7], zero=[False, False, False])
    run.snapshot(0, ids)
    run.step_end(0)
    run.finish()


# -- FT010 ------------------------------------------------------------------------------
def _saved_at(b: RunBuilder, saved: str, *, loaded_rank: int = 0, ranks_before: int = 1) -> None:
    run = b.start()
    for step in range(3):
        _step(run, step, counter=step + 1)
        for rank in range(ranks_before):  # only rank 0 logs the save below
            run.checksum(step, 0, {"w": f"after{step}", "opt": f"o{step}"}, rank=rank)
        if step == 1:
            run.checksum(
                2, 0, {"w": saved, "opt": "o1"}, when=ChecksumWhen.AT_SAVE, checkpoint=CKPT1
            )
            run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1)
    again.checksum(
        1,
        0,
        {"w": saved, "opt": "o1"},
        rank=loaded_rank,
        when=ChecksumWhen.AFTER_LOAD,
        checkpoint=CKPT1,
    )
    again.finish()


def checkpoint_of_its_step(b: RunBuilder) -> None:
    _saved_at(b, "after1")


def checkpoint_a_step_late(b: RunBuilder) -> None:
    _saved_at(b, "after2")


def load_without_a_save(b: RunBuilder) -> None:
    """Rank 1 was there when checkpoint 1 was saved, but logged no save checksum."""
    _saved_at(b, "after1", loaded_rank=1, ranks_before=2)


def load_by_a_new_rank(b: RunBuilder) -> None:
    """Saved by one rank, loaded by rank 1 of another layout (more ranks now): no save of
    its own to compare with, and none missing (FT006 compares the cell as a whole)."""
    _saved_at(b, "after1", loaded_rank=1)


# -- FT011 ------------------------------------------------------------------------------
def counted_once(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b)
    _step(again, 2, counter=3)
    _step(again, 3, counter=4)
    again.finish()


def gradient_not_cleared(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [0, 1, 2])
    run.snapshot(0, ids)
    run.step_end(0)
    _step(run, 1, counter=2, grad_extra=ids)
    run.finish()


def stepped_twice(b: RunBuilder) -> None:
    run = b.start()
    _step(run, 0, counter=1)
    _step(run, 1, counter=3)
    _step(run, 2, counter=4)
    run.finish()


def replayed_after_resume(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b)
    _step(again, 2, counter=4)  # the weights of the abandoned step 2 were kept: 3 + 1
    again.finish()


def scheduler_restarted(b: RunBuilder) -> None:
    again = _crash_after_checkpoint_1(b)
    _step(again, 2, counter=1)
    again.finish()


# -- FT012 ------------------------------------------------------------------------------
def _manifest(run: Incarnation, step: int, frozen: bool, declared: str = "") -> None:
    run.trainer(0).log(
        ParameterManifest(
            step=step,
            attempt=0,
            cell=0,
            rank=0,
            digest="frozen" if frozen else "trained",
            names=["body.weight", "head.weight"],
            shapes=[[4, 4], [8, 4]],
            dtypes=["float32", "float32"],
            requires_grad=[True, not frozen],
            groups=[0, 0 if not frozen else -1],
            declared_change=declared,
        )
    )


def _head(b: RunBuilder, *, frozen: bool, declared: str = "") -> None:
    run = b.start()
    _step(run, 0, counter=1)
    _manifest(run, 0, frozen=False)
    _step(run, 1, counter=2)
    run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1)
    _manifest(again, 2, frozen=frozen, declared=declared)
    again.finish()


def same_manifest_after_resume(b: RunBuilder) -> None:
    _head(b, frozen=False)


def head_frozen_after_resume(b: RunBuilder) -> None:
    _head(b, frozen=True)


def head_frozen_declared(b: RunBuilder) -> None:
    _head(b, frozen=True, declared="freeze the head for the last epoch")


CASES: tuple[Case, ...] = (
    Case("resumed_and_restored", "FT009", resumed_and_restored),
    Case(
        "resumed_without_reload",
        "FT009",
        resumed_without_reload,
        (Expect(cell=0, step=2, text="no restore evidence"),),
    ),
    Case("resumed_adopting_live_state", "FT009", resumed_adopting_live_state),
    Case("healed_with_evidence", "FT009", healed_with_evidence, cells=2),
    Case(
        "healed_without_evidence",
        "FT009",
        healed_without_evidence,
        (Expect(cell=1, step=1, text="healed from cell 0"),),
        cells=2,
    ),
    Case(
        "allocation_lost",
        "FT009",
        allocation_lost,
        (Expect(step=1, attempt=0, text="no allocation in the log"),),
    ),
    Case(
        "receipt_outside_allocation",
        "FT009",
        receipt_outside_allocation,
        (Expect(ids=(7,), step=0, text="does not hold"),),
    ),
    Case("checkpoint_of_its_step", "FT010", checkpoint_of_its_step),
    Case(
        "checkpoint_a_step_late",
        "FT010",
        checkpoint_a_step_late,
        (Expect(step=1, cell=0, text="is not the state after step 1"),),
    ),
    Case(
        "load_without_a_save",
        "FT010",
        load_without_a_save,
        (Expect(cell=0, kind="load_incomparable", text="cannot be compared"),),
    ),
    Case("load_by_a_new_rank", "FT010", load_by_a_new_rank),
    Case("counted_once", "FT011", counted_once),
    Case(
        "gradient_not_cleared",
        "FT011",
        gradient_not_cleared,
        (Expect(ids=(0, 1, 2), step=1, text="never cleared"),),
    ),
    Case(
        "stepped_twice",
        "FT011",
        stepped_twice,
        (Expect(step=1, cell=0, text="applied twice"),),
    ),
    Case(
        "replayed_after_resume",
        "FT011",
        replayed_after_resume,
        (Expect(step=2, cell=0, text="applied twice"),),
    ),
    Case(
        "scheduler_restarted",
        "FT011",
        scheduler_restarted,
        (Expect(step=2, cell=0, text="went back"),),
    ),
    Case("same_manifest_after_resume", "FT012", same_manifest_after_resume),
    Case(
        "head_frozen_after_resume",
        "FT012",
        head_frozen_after_resume,
        (Expect(step=2, cell=0, text="head.weight frozen"),),
    ),
    Case("head_frozen_declared", "FT012", head_frozen_declared),
)
