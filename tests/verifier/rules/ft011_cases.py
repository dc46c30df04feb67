"""FT011 application-count: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import hooked_resume_from_1, hooked_step

RULE = "FT011"


def counted_once(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b)
    hooked_step(again, 2, counter=3)
    hooked_step(again, 3, counter=4)
    again.finish()


def gradient_not_cleared(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [0, 1, 2])
    run.snapshot(0, ids)
    run.step_end(0)
    hooked_step(run, 1, counter=2, grad_extra=ids)
    run.finish()


def stepped_twice(b: RunBuilder) -> None:
    run = b.start()
    hooked_step(run, 0, counter=1)
    hooked_step(run, 1, counter=3)
    hooked_step(run, 2, counter=4)
    run.finish()


def replayed_after_resume(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b)
    hooked_step(again, 2, counter=4)  # the weights of the abandoned step 2 were kept: 3 + 1
    again.finish()


def scheduler_restarted(b: RunBuilder) -> None:
    again = hooked_resume_from_1(b)
    hooked_step(again, 2, counter=1)
    again.finish()


CASES: tuple[Case, ...] = (
    Case("counted_once", counted_once),
    Case(
        "gradient_not_cleared",
        gradient_not_cleared,
        (Expect(ids=(0, 1, 2), step=1, text="never cleared"),),
    ),
    Case("stepped_twice", stepped_twice, (Expect(step=1, cell=0, text="applied twice"),)),
    Case(
        "replayed_after_resume",
        replayed_after_resume,
        (Expect(step=2, cell=0, text="applied twice"),),
    ),
    Case("scheduler_restarted", scheduler_restarted, (Expect(step=2, cell=0, text="went back"),)),
)
