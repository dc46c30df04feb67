"""FT009 restore-evidence: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from ftaudit.eventlog import (
    CellReconfigured,
    ChecksumWhen,
    StateAdopted,
)
from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import CKPT1, hooked_resume_from_1, hooked_step

RULE = "FT009"


def resumed_and_restored(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b)
    hooked_step(again, 2, counter=3)
    again.finish()


def resumed_without_reload(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b, restored=False)
    hooked_step(again, 2, counter=3)
    again.finish()


def resumed_adopting_live_state(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b, restored=False)
    again.trainer(0).log(
        StateAdopted(step=1, cell=0, rank=0, reason="in-memory replica survived", checkpoint=CKPT1)
    )
    hooked_step(again, 2, counter=3)
    again.finish()


def _healed(b: RunBuilder, *, evidence: bool) -> None:
    run = b.start()
    hooked_step(run, 0, counter=1)
    run.driver.log(
        CellReconfigured(
            step=1, attempt=0, quorum_id=1, heal_source=0, healed_cells=[1], alive_cells=[0, 1]
        )
    )
    if evidence:
        run.checksum(1, 0, {"w": "a"}, when=ChecksumWhen.AFTER_HEAL)
        run.checksum(1, 1, {"w": "a"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    hooked_step(run, 1, counter=2)
    run.finish()


def allocation_lost(b: RunBuilder) -> None:
    run = b.start()
    hooked_step(run, 0, counter=1)
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


CASES: tuple[Case, ...] = (
    Case("resumed_and_restored", resumed_and_restored),
    Case(
        "resumed_without_reload",
        resumed_without_reload,
        (Expect(cell=0, step=2, text="no restore evidence"),),
    ),
    Case("resumed_adopting_live_state", resumed_adopting_live_state),
    Case("healed_with_evidence", partial(_healed, evidence=True), cells=2),
    Case(
        "healed_without_evidence",
        partial(_healed, evidence=False),
        (Expect(cell=1, step=1, text="healed from cell 0"),),
        cells=2,
    ),
    Case(
        "allocation_lost",
        allocation_lost,
        (Expect(step=1, attempt=0, text="no allocation in the log"),),
    ),
    Case(
        "receipt_outside_allocation",
        receipt_outside_allocation,
        (Expect(ids=(7,), step=0, text="does not hold"),),
    ),
)
