"""FT003 allocator-replay: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from ftaudit.eventlog import IntRuns
from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import crashed_after_step_2, restart_ok, retried

RULE = "FT003"


def reissued_ids(b: RunBuilder) -> None:
    crashed_after_step_2(b)
    again = b.start(resume_from=1, resume_counter=6)  # should be 9
    again.train(2, [6, 7, 8])
    again.finish()


def wrong_ids(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], witness_ids=IntRuns.arc(5, 3, b.B))
    run.finish()


def wrong_stale(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], stale_ids=IntRuns())
    run.finish()


def wrong_counter(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.alloc(1, [3, 4, 5], counter_after=7)
    run.finish()


def too_many_per_step(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, list(range(7)))  # B = 20: B - keep = 6
    run.finish()


CASES: tuple[Case, ...] = (
    Case("a restart continues the counter", restart_ok),
    Case(
        "a resumed incarnation re-issuing abandoned ids",
        reissued_ids,
        (Expect(ids=(6, 7, 8), samples=(6, 7, 8), text="re-issues"),),
    ),
    Case("ids differing from the replay", wrong_ids, (Expect(text="its ids are"),)),
    Case("stale ids differing from the replay", wrong_stale, (Expect(text="its stale ids are"),)),
    Case(
        "counter_after differing from the replay",
        wrong_counter,
        (Expect(step=1, text="counter_after is 7, the replay gives 6"),),
    ),
    Case(
        "a step allocating more than B - keep",
        too_many_per_step,
        (Expect(step=0, text="within B - keep = 6 ids"),),
    ),
    Case("a step retried thrice, discards cleared", retried(4, clear=True), cells=2),
    Case("a step retried six times, discards cleared", retried(7, clear=True), cells=2),
    Case(
        "a retry on slots no clear reached",
        retried(3, clear=False),
        (
            Expect(step=5, attempt=1, kind="over_budget", ids=(6, 7), samples=(22, 23)),
            Expect(step=5, attempt=2, kind="over_budget", ids=(8, 9, 10, 11)),
        ),
        cells=2,
    ),
)
