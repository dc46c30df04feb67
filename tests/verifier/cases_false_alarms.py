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


# -- FT004 excusals ----------------------------------------------------------------------
def kl_loss(nonzero_zero_advantage: bool):
    """A loss with a KL term: a zero-advantage sample still gets gradient (declared)."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        ids = run.alloc(0, [10, 11, 12])
        run.advantage(0, ids, zero=[False, True, False], pure=False)
        run.snapshot(0, [0, 1, 2] if nonzero_zero_advantage else [0, 2])
        run.step_end(0)
        run.finish()

    return build


def no_tokens(*, nonzero: bool, empty: int = 1):
    """Samples fully masked (no loss tokens on any rank): excused, and counted."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        samples = list(range(10, 14))
        ids = run.alloc(0, samples)
        tokens = [0] * empty + [4] * (len(samples) - empty)
        run.advantage(0, ids, zero=[False] * len(samples), tokens=tokens, pure=True)
        trained = ids[empty:] + (ids[:empty] if nonzero else [])
        run.snapshot(0, sorted(trained))
        run.step_end(0)
        run.finish()

    return build


def zero_allocation_step(*, leak: bool):
    """Step 2 has no samples: no allocation; its snapshot is still checked."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        run.train(1, [3, 4, 5])
        rows = [0, 1, 2, 3, 4, 5] + ([9] if leak else [])
        run.snapshot(2, rows, stale=[])
        run.step_end(2)
        run.train(3, [6, 7, 8])
        run.finish()

    return build


def layout_change(*, drop_in_step: int | None = None):
    """Incarnation 1 resumes with another pipeline split: other witness instances."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        for step in range(3):
            run.train(step, [2 * step, 2 * step + 1], instances=("pp0.head", "pp0.tail"))
            if step == 1:
                run.checkpoint(1)
        run.finish()
        run = b.start(resume_from=1)
        split = ("pp0.head", "pp0.tail", "pp1.head", "pp1.tail")
        for step in range(2, 5):
            shown = split[:-1] if step == drop_in_step else split
            run.train(step, [2 * step, 2 * step + 1], instances=shown)
        run.finish()

    return build


CASES = (
    *CASES,
    Case("a KL loss: zero-advantage samples get gradient", "FT004", kl_loss(True)),
    Case(
        "a KL loss: a zero-advantage sample without gradient is missing",
        "FT004",
        kl_loss(False),
        (Expect(ids=(1,), samples=(11,), kind="missing"),),
    ),
    Case("a fully masked sample is excused", "FT004", no_tokens(nonzero=False)),
    Case(
        "a fully masked sample with a nonzero row is extra",
        "FT004",
        no_tokens(nonzero=True),
        (Expect(ids=(0,), samples=(10,), kind="extra", text="should leave no trace"),),
    ),
    Case(
        "a step mostly excused warns",
        "FT004",
        no_tokens(nonzero=False, empty=3),
        (Expect(step=0, kind="mostly_excused", severity="warning", text="3 of 4 samples"),),
    ),
    Case("a step allocating nothing is checked", "FT004", zero_allocation_step(leak=False)),
    Case(
        "a step allocating nothing still sees a leak",
        "FT004",
        zero_allocation_step(leak=True),
        (Expect(step=2, ids=(9,), kind="extra", text="never allocated"),),
    ),
    Case("a resume with another pipeline split", "FT004", layout_change()),
    Case(
        "an instance of the new split missing in one step",
        "FT004",
        layout_change(drop_in_step=3),
        (Expect(step=3, instance="pp1.tail", kind="missing_instance"),),
    ),
)


def stale_not_cleared(b: RunBuilder) -> None:
    """The trainer neither zeroes nor declares stale ids: old committed rows linger."""
    run = b.start()
    rows: set[int] = set()
    for step in range(6):
        ids = run.alloc(step, range(4 * step, 4 * step + 4))
        rows |= set(ids)
        run.snapshot(step, sorted(rows), stale=[])  # never cleared
        run.step_end(step)
    run.finish()


CASES = (
    *CASES,
    Case(
        "uncleared stale rows are named as such, not as leaked work",
        "FT004",
        stale_not_cleared,
        (
            Expect(step=3, kind="extra", text="should have been zeroed as stale"),
            Expect(step=4, kind="extra", text="should have been zeroed as stale"),
            Expect(step=5, kind="extra", text="should have been zeroed as stale"),
        ),
    ),
)
