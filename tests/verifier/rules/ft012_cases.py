"""FT012 parameter-manifest: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from ftaudit.eventlog import (
    ParameterManifest,
)
from tests.support.builder import Incarnation, RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import hooked_step

RULE = "FT012"


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
    hooked_step(run, 0, counter=1)
    _manifest(run, 0, frozen=False)
    hooked_step(run, 1, counter=2)
    run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1)
    _manifest(again, 2, frozen=frozen, declared=declared)
    again.finish()


CASES: tuple[Case, ...] = (
    Case("same_manifest_after_resume", partial(_head, frozen=False)),
    Case(
        "head_frozen_after_resume",
        partial(_head, frozen=True),
        (Expect(step=2, cell=0, text="head.weight frozen"),),
    ),
    Case(
        "head_frozen_declared",
        partial(_head, frozen=True, declared="freeze the head for the last epoch"),
    ),
)
