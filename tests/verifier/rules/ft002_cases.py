"""FT002 step-continuity: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from ftaudit.eventlog import CheckpointRef, RunLog
from tests.support.builder import DISCARDED, NORMAL, OPTIONS, RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import crashed_after_step_2, three_steps

RULE = "FT002"


def committed_twice(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.step_end(0)
    run.train(1, [3, 4, 5])
    run.finish()


def step_skipped(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.train(2, [3, 4, 5])
    run.finish()


def resumed_at_wrong_step(b: RunBuilder) -> None:
    run = crashed_after_step_2(b)
    log = RunLog.start(
        b.root,
        buffer_size=b.B,
        resume_from=CheckpointRef(iteration=1, incarnation=0),
        options=OPTIONS,
    )
    b.open.append(type(run)(b, log, run.allocator))
    b.open[-1].step_end(3)
    log.finish()


def accepted_discarded(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.step_end(0, {0: NORMAL, 1: DISCARDED})
    run.finish()


CASES: tuple[Case, ...] = (
    Case("steps 0..2 committed once each", three_steps),
    Case("a step committed twice", committed_twice, (Expect(step=0, text="2 times"),)),
    Case("a step skipped", step_skipped, (Expect(step=1, text="never committed"),)),
    Case(
        "a resume that starts after its checkpoint's next step",
        resumed_at_wrong_step,
        (Expect(step=3, text="began at step 3, not 2"), Expect(step=2, text="never committed")),
    ),
    Case(
        "an accepted attempt that a cell discarded",
        accepted_discarded,
        (Expect(step=0, cell=1, text="discarded"),),
        cells=2,
    ),
)
