"""Correct runs of shapes that once raised false alarms (issue 14), and their broken twins."""

from __future__ import annotations

from tests.verifier.builder import DISCARDED, NORMAL, RunBuilder
from tests.verifier.cases import Case, Expect

B = 20  # keep = 14, B - keep = 6


def _warm(b: RunBuilder, steps: int = 5) -> object:
    """Steps 0..steps-1 of 4 samples each: the ring has wrapped once at step 5."""
    run = b.start()
    for step in range(steps):
        run.train(step, range(4 * step, 4 * step + 4))
    return run


def retried(attempts: int, *, clear: bool, samples: int = 4):
    def build(b: RunBuilder) -> None:
        run = _warm(b)
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


CASES = (
    Case("a step retried thrice, discards cleared", "FT003", retried(4, clear=True), cells=2),
    Case("a step retried thrice, discards cleared", "FT004", retried(4, clear=True), cells=2),
    Case("a step retried six times, discards cleared", "FT003", retried(7, clear=True), cells=2),
    Case("a step retried six times, discards cleared", "FT004", retried(7, clear=True), cells=2),
    Case(
        "a retry on slots no clear reached",
        "FT003",
        retried(3, clear=False),
        (
            Expect(step=5, attempt=1, kind="over_budget", ids=(6, 7), samples=(22, 23)),
            Expect(step=5, attempt=2, kind="over_budget", ids=(8, 9, 10, 11)),
        ),
        cells=2,
    ),
)
