"""FT004 witness-exactly-once: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from tests.support.builder import DISCARDED, ERRORED, HEAD, NORMAL, TAIL, RunBuilder
from tests.verifier.rules.case import Build, Case, Expect
from tests.verifier.rules.recipes import (
    clean_run,
    crashed_after_step_2,
    restart_ok,
    retried,
    threes,
)

RULE = "FT004"


def no_events(b: RunBuilder) -> None:
    b.start().finish()


def cumulative_ok(b: RunBuilder) -> None:
    run = b.start()
    for step in range(4):
        run.train(step, [2 * step, 2 * step + 1])
    run.finish()


def missing_id(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [100, 101, 102])
    run.snapshot(0, [0, 2])
    run.step_end(0)
    run.finish()


def extra_never_allocated(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [100, 101, 102])
    run.snapshot(0, [0, 1, 2, 5], stale=[])
    run.step_end(0)
    run.finish()


def errored_cell_skipped(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.snapshot(0, [0, 1, 2], cell=0)
    run.snapshot(0, [7], cell=1)  # a dying cell's snapshot means nothing
    run.step_end(0, {0: NORMAL, 1: ERRORED})
    run.finish()


def discarded_cell_skipped(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.snapshot(0, [0, 1, 2], cell=0)
    run.step_end(0, {0: NORMAL, 1: DISCARDED})  # FT002 objects; FT004 skips cell 1
    run.finish()


def stale_both_sides(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    # id 2 is missing but declared stale; id 5 is nonzero but declared stale: both removed
    run.snapshot(0, [0, 1, 5], stale=[2, 5])
    run.step_end(0)
    run.finish()


def cells_independent(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [10, 11, 12])
    run.snapshot(0, [0, 1, 2], cell=0)
    run.snapshot(0, [0, 2], cell=1)
    run.step_end(0)
    run.finish()


def retry_replaces(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2], attempt=0, cells={0: DISCARDED})
    run.train(0, [0, 1, 2], attempt=1)
    run.finish()


def older_attempt_ignored(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], attempt=0)
    run.snapshot(0, [9], attempt=0)  # wrong, but attempt 0 was retried
    run.retried(0, 0, {0: DISCARDED})
    run.alloc(0, [0, 1, 2], attempt=1)
    run.snapshot(0, [3, 4, 5], attempt=1)
    run.step_end(0, attempt=1)
    run.finish()


def latest_attempt_wrong(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], attempt=0)
    run.snapshot(0, [0, 1, 2], attempt=0)  # right for attempt 0, which does not count
    run.retried(0, 0, {0: DISCARDED})
    run.alloc(0, [0, 1, 2], attempt=1)
    run.snapshot(0, [3, 4], attempt=1)
    run.step_end(0, attempt=1)
    run.finish()


def cumulative_across_steps(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.snapshot(0, [0, 1, 2])
    run.step_end(0)
    run.alloc(1, [3, 4, 5])
    run.snapshot(1, [3, 4, 5])  # ids 0..2 of step 0 are still in the window
    run.step_end(1)
    run.finish()


def normal_cell_without_snapshot(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.snapshot(0, [0, 1, 2], cell=0)
    run.step_end(0)
    run.finish()


def head_tail_separate(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.snapshot(0, [0, 1, 2], instance=HEAD)
    run.snapshot(0, [0, 1], instance=TAIL)
    run.step_end(0)
    run.finish()


def ring_wrap_missing(b: RunBuilder) -> None:
    run = b.start()
    for step in range(6):
        run.train(step, threes(step))
    # step 6 takes counter positions 18..20 = slots 8, 9, 0; slot 9 (sample 19) is lost
    run.alloc(6, [18, 19, 20])
    rows = run.weights[0] | {8, 0}
    run.snapshot(6, sorted(rows))
    run.step_end(6)
    run.finish()


def zero_excused(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [10, 11, 12], zero_advantage=[11])
    run.finish()


def zero_stays_excused(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [10, 11, 12], zero_advantage=[11])
    run.train(1, [13, 14, 15])
    run.train(2, [16, 17, 18])
    run.finish()


def zero_present_is_extra(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [10, 11, 12])
    run.advantage(0, ids, zero=[False, True, False])
    run.snapshot(0, [0, 1, 2])
    run.step_end(0)
    run.finish()


def zero_only_latest_attempt(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [10, 11, 12], attempt=0)
    run.advantage(0, [3, 4, 5], zero=[False, True, False], attempt=0)  # stale advice
    run.retried(0, 0, {0: DISCARDED})
    ids = run.alloc(0, [10, 11, 12], attempt=1)
    run.advantage(0, ids, zero=[False, False, False], attempt=1)
    run.snapshot(0, [3, 5], attempt=1)
    run.step_end(0, attempt=1)
    run.finish()


def zero_empty_tokens(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [10, 11, 12])
    # context parallel: rank 0 holds none of sample 11's tokens, rank 1 holds four of them
    run.advantage(0, ids, zero=[False, True, False], tokens=[4, 0, 4])
    run.advantage(0, ids, zero=[False, False, False], tokens=[4, 4, 4], rank=1)
    run.snapshot(0, [0, 2])
    run.step_end(0)
    run.finish()


def zero_global_across_cells(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [10, 11, 12], zero_advantage=[11])  # advice logged by cell 0 only
    run.finish()


def zero_cancelled_by_reallocation(b: RunBuilder) -> None:
    run = b.start()  # B = 10: slot 1 comes back at counter 11, in step 3
    run.train(0, [0, 1, 2], zero_advantage=[1])
    run.train(1, [3, 4, 5])
    run.train(2, [6, 7, 8])
    run.alloc(3, [9, 10, 11])  # slots 9, 0, 1; sample 11 is not zero-advantage
    run.snapshot(3, sorted(run.weights[0] | {9, 0}))  # slot 1 missing
    run.step_end(3)
    run.finish()


def zero_three_lives(b: RunBuilder) -> None:
    run = b.start()  # B = 10: slot 1 is counter 1 (zero), 11 (trained), 21 (zero)
    for step in range(9):
        samples = threes(step)
        run.train(step, samples, zero_advantage=[s for s in samples if s in (1, 21)])
    run.finish()


def zero_never_allocated(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [10, 11, 12])
    run.advantage(0, [*ids, 7], zero=[False, False, False, True])  # id 7 never allocated
    run.snapshot(0, [0, 2])
    run.step_end(0)
    run.finish()


def restart_leak(b: RunBuilder) -> None:
    run = crashed_after_step_2(b)
    leaked = set(run.weights[0])  # weights of step 2, which the restore should discard
    again = b.start(resume_from=1)
    again.weights[0] |= leaked  # the restore did not roll the witness back
    again.train(2, [6, 7, 8])
    again.finish()


def kl_loss(nonzero_zero_advantage: bool) -> Build:
    """A loss with a KL term: a zero-advantage sample still gets gradient (declared)."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        ids = run.alloc(0, [10, 11, 12])
        run.advantage(0, ids, zero=[False, True, False], pure=False)
        run.snapshot(0, [0, 1, 2] if nonzero_zero_advantage else [0, 2])
        run.step_end(0)
        run.finish()

    return build


def no_tokens(*, nonzero: bool, empty: int = 1) -> Build:
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


def zero_allocation_step(*, leak: bool) -> Build:
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


def layout_change(*, drop_in_step: int | None = None, new_holds_old: bool = False) -> Build:
    """Incarnation 1 resumes with another pipeline split: stage 0 keeps its witnesses (and
    their restored rows), stage 1's are new and start from zero rows."""

    def build(b: RunBuilder) -> None:
        old = ("pp0.head", "pp0.tail")
        run = b.start()
        for step in range(3):
            run.train(step, [2 * step, 2 * step + 1], instances=old)
            if step == 1:
                run.checkpoint(1)
        run.finish()
        run = b.start(resume_from=1)
        since: set[int] = set()
        for step in range(2, 5):
            ids = run.alloc(step, [2 * step, 2 * step + 1])
            stale = run.last_stale
            rows = run.weights[0]
            rows |= set(ids)
            since |= set(ids)
            for instance in old:
                run.snapshot(step, sorted(rows), instance=instance)
            for instance in ("pp1.head", "pp1.tail"):
                if step == drop_in_step and instance == "pp1.tail":
                    continue
                shown = rows if new_holds_old else since
                run.snapshot(step, sorted(shown), instance=instance)
            rows -= set(stale)
            since -= set(stale)
            run.step_end(step)
        run.finish()

    return build


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


CASES: tuple[Case, ...] = (
    Case("no events", no_events),
    Case("correct cumulative ids", cumulative_ok),
    Case(
        "a missing id",
        missing_id,
        (Expect(ids=(1,), samples=(101,), step=0, cell=0, instance=HEAD, text="never reached"),),
    ),
    Case(
        "an extra never-allocated id",
        extra_never_allocated,
        (Expect(ids=(5,), step=0, cell=0, text="never allocated"),),
    ),
    Case("an errored cell is skipped", errored_cell_skipped, cells=2),
    Case("a discarded cell is skipped", discarded_cell_skipped, cells=2),
    Case("stale ids are removed from both sides", stale_both_sides),
    Case(
        "several cells are checked independently",
        cells_independent,
        (Expect(ids=(1,), samples=(11,), cell=1),),
        cells=2,
    ),
    Case("a retry's attempt-1 allocation replaces attempt 0", retry_replaces),
    Case("an older attempt's snapshot is ignored", older_attempt_ignored),
    Case(
        "a wrong latest-attempt snapshot is reported although an older one was right",
        latest_attempt_wrong,
        (Expect(ids=(5,), samples=(2,), step=0, attempt=1),),
    ),
    Case(
        "expectation is cumulative across steps",
        cumulative_across_steps,
        (Expect(ids=(0, 1, 2), samples=(0, 1, 2), step=1),),
    ),
    Case(
        "a normal cell with no snapshot",
        normal_cell_without_snapshot,
        (Expect(step=0, cell=1, text="logged no witness snapshot"),),
        cells=2,
    ),
    Case(
        "head and tail instances are compared separately",
        head_tail_separate,
        (Expect(ids=(2,), instance=TAIL),),
    ),
    Case("ring wrap with B=10 passes", partial(clean_run, steps=8), B=10),
    Case(
        "ring wrap with B=10 and an id truly missing",
        ring_wrap_missing,
        (Expect(ids=(9,), samples=(19,), step=6),),
        B=10,
    ),
    Case("zero advantage: excused when missing", zero_excused),
    Case("zero advantage: stays excused at later steps", zero_stays_excused),
    Case(
        "zero advantage: reported as extra when present",
        zero_present_is_extra,
        (Expect(ids=(1,), samples=(11,), text="zero-advantage"),),
    ),
    Case(
        "zero advantage: only the latest attempt's advantage events count",
        zero_only_latest_attempt,
        (Expect(ids=(4,), samples=(11,), attempt=1),),
    ),
    Case(
        "an empty local token list is not excused while another rank holds tokens",
        zero_empty_tokens,
        (Expect(ids=(1,), samples=(11,)),),
    ),
    Case("zero advantage: excusal is global across cells", zero_global_across_cells, cells=2),
    Case(
        "zero advantage: re-allocation of the id cancels it",
        zero_cancelled_by_reallocation,
        (Expect(ids=(1,), samples=(11,), step=3),),
        B=10,
    ),
    Case("zero advantage: three lives zero / nonzero / zero", zero_three_lives, B=10),
    Case(
        "zero advantage: an excusal of a never-allocated id changes nothing",
        zero_never_allocated,
        (Expect(ids=(1,), samples=(11,)),),
    ),
    Case("a restart re-trains with fresh ids", restart_ok),
    Case(
        "a restart whose restored weights kept abandoned ids",
        restart_leak,
        (Expect(ids=(6, 7, 8), samples=(6, 7, 8), step=2, text="abandoned work"),),
    ),
    Case("a step retried thrice, discards cleared", retried(4, clear=True), cells=2),
    Case("a step retried six times, discards cleared", retried(7, clear=True), cells=2),
    Case("a KL loss: zero-advantage samples get gradient", kl_loss(True)),
    Case(
        "a KL loss: a zero-advantage sample without gradient is missing",
        kl_loss(False),
        (Expect(ids=(1,), samples=(11,), kind="missing"),),
    ),
    Case("a fully masked sample is excused", no_tokens(nonzero=False)),
    Case(
        "a fully masked sample with a nonzero row is extra",
        no_tokens(nonzero=True),
        (Expect(ids=(0,), samples=(10,), kind="extra", text="should leave no trace"),),
    ),
    Case(
        "a step mostly excused warns",
        no_tokens(nonzero=False, empty=3),
        (Expect(step=0, kind="mostly_excused", severity="warning", text="3 of 4 samples"),),
    ),
    Case("a step allocating nothing is checked", zero_allocation_step(leak=False)),
    Case(
        "a step allocating nothing still sees a leak",
        zero_allocation_step(leak=True),
        (Expect(step=2, ids=(9,), kind="extra", text="never allocated"),),
    ),
    Case("a resume with another pipeline split", layout_change()),
    Case(
        "a new instance holding rows from before it existed",
        layout_change(new_holds_old=True),
        (
            Expect(step=2, instance="pp1.head", kind="extra"),
            Expect(step=2, instance="pp1.tail", kind="extra"),
            Expect(step=3, instance="pp1.head", kind="extra"),
            Expect(step=3, instance="pp1.tail", kind="extra"),
            Expect(step=4, instance="pp1.head", kind="extra"),
            Expect(step=4, instance="pp1.tail", kind="extra"),
        ),
    ),
    Case(
        "an instance of the new split missing in one step",
        layout_change(drop_in_step=3),
        (Expect(step=3, instance="pp1.tail", kind="missing_instance"),),
    ),
    Case(
        "uncleared stale rows are named as such, not as leaked work",
        stale_not_cleared,
        (
            Expect(step=3, kind="extra", text="should have been zeroed as stale"),
            Expect(step=4, kind="extra", text="should have been zeroed as stale"),
            Expect(step=5, kind="extra", text="should have been zeroed as stale"),
        ),
    ),
)
