"""FT010 checkpoint-state: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from ftaudit.eventlog import (
    ChecksumWhen,
)
from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import CKPT1, hooked_step

RULE = "FT010"


def _saved_at(b: RunBuilder, saved: str, *, loaded_rank: int = 0, ranks_before: int = 1) -> None:
    run = b.start()
    for step in range(3):
        hooked_step(run, step, counter=step + 1)
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


CASES: tuple[Case, ...] = (
    Case("checkpoint_of_its_step", partial(_saved_at, saved="after1")),
    Case(
        "checkpoint_a_step_late",
        partial(_saved_at, saved="after2"),
        (Expect(step=1, cell=0, text="is not the state after step 1"),),
    ),
    # rank 1 was there when checkpoint 1 was saved, but logged no save checksum
    Case(
        "load_without_a_save",
        partial(_saved_at, saved="after1", loaded_rank=1, ranks_before=2),
        (Expect(cell=0, kind="load_incomparable", text="cannot be compared"),),
    ),
    # saved by one rank, loaded by rank 1 of another layout (more ranks now): no save of
    # its own to compare with, and none missing (FT006 compares the cell as a whole)
    Case("load_by_a_new_rank", partial(_saved_at, saved="after1", loaded_rank=1)),
)
