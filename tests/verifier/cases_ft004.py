"""FT004 witness-exactly-once: the cases of issue 4 item 3, as data."""

from __future__ import annotations

from ftaudit.eventlog import CheckpointRef
from tests.support.builder import DISCARDED, ERRORED, HEAD, NORMAL, TAIL, RunBuilder
from tests.verifier.cases import Case, Expect


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


def ring_wrap_ok(b: RunBuilder) -> None:
    run = b.start()
    for step in range(8):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
    run.finish()


def ring_wrap_missing(b: RunBuilder) -> None:
    run = b.start()
    for step in range(6):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
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
        samples = [3 * step, 3 * step + 1, 3 * step + 2]
        run.train(step, samples, zero_advantage=[s for s in samples if s in (1, 21)])
    run.finish()


def zero_never_allocated(b: RunBuilder) -> None:
    run = b.start()
    ids = run.alloc(0, [10, 11, 12])
    run.advantage(0, [*ids, 7], zero=[False, False, False, True])  # id 7 never allocated
    run.snapshot(0, [0, 2])
    run.step_end(0)
    run.finish()


def restart_ok(b: RunBuilder) -> None:
    run = b.start()
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        if step == 1:
            run.checkpoint(1)
    run.log.close()  # crashed after step 2
    again = b.start(resume_from=1)
    for step in range(2, 5):
        again.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
    again.finish()


def restart_leak(b: RunBuilder) -> None:
    run = b.start()
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        if step == 1:
            run.checkpoint(1)
    leaked = set(run.weights[0])  # weights of step 2, which the restore should discard
    run.log.close()
    again = b.start(resume_from=1)
    again.weights[0] |= leaked  # the restore did not roll the witness back
    again.train(2, [6, 7, 8])
    again.finish()


def _unused() -> CheckpointRef | None:
    return None


CASES = (
    Case("no events", "FT004", no_events),
    Case("correct cumulative ids", "FT004", cumulative_ok),
    Case(
        "a missing id",
        "FT004",
        missing_id,
        (Expect(ids=(1,), samples=(101,), step=0, cell=0, instance=HEAD, text="never reached"),),
    ),
    Case(
        "an extra never-allocated id",
        "FT004",
        extra_never_allocated,
        (Expect(ids=(5,), step=0, cell=0, text="never allocated"),),
    ),
    Case("an errored cell is skipped", "FT004", errored_cell_skipped, cells=2),
    Case("a discarded cell is skipped", "FT004", discarded_cell_skipped, cells=2),
    Case("stale ids are removed from both sides", "FT004", stale_both_sides),
    Case(
        "several cells are checked independently",
        "FT004",
        cells_independent,
        (Expect(ids=(1,), samples=(11,), cell=1),),
        cells=2,
    ),
    Case("a retry's attempt-1 allocation replaces attempt 0", "FT004", retry_replaces),
    Case("an older attempt's snapshot is ignored", "FT004", older_attempt_ignored),
    Case(
        "a wrong latest-attempt snapshot is reported although an older one was right",
        "FT004",
        latest_attempt_wrong,
        (Expect(ids=(5,), samples=(2,), step=0, attempt=1),),
    ),
    Case(
        "expectation is cumulative across steps",
        "FT004",
        cumulative_across_steps,
        (Expect(ids=(0, 1, 2), samples=(0, 1, 2), step=1),),
    ),
    Case(
        "a normal cell with no snapshot",
        "FT004",
        normal_cell_without_snapshot,
        (Expect(step=0, cell=1, text="logged no witness snapshot"),),
        cells=2,
    ),
    Case(
        "head and tail instances are compared separately",
        "FT004",
        head_tail_separate,
        (Expect(ids=(2,), instance=TAIL),),
    ),
    Case("ring wrap with B=10 passes", "FT004", ring_wrap_ok, B=10),
    Case(
        "ring wrap with B=10 and an id truly missing",
        "FT004",
        ring_wrap_missing,
        (Expect(ids=(9,), samples=(19,), step=6),),
        B=10,
    ),
    Case("zero advantage: excused when missing", "FT004", zero_excused),
    Case("zero advantage: stays excused at later steps", "FT004", zero_stays_excused),
    Case(
        "zero advantage: reported as extra when present",
        "FT004",
        zero_present_is_extra,
        (Expect(ids=(1,), samples=(11,), text="zero-advantage"),),
    ),
    Case(
        "zero advantage: only the latest attempt's advantage events count",
        "FT004",
        zero_only_latest_attempt,
        (Expect(ids=(4,), samples=(11,), attempt=1),),
    ),
    Case(
        "an empty local token list is not excused while another rank holds tokens",
        "FT004",
        zero_empty_tokens,
        (Expect(ids=(1,), samples=(11,)),),
    ),
    Case(
        "zero advantage: excusal is global across cells", "FT004", zero_global_across_cells, cells=2
    ),
    Case(
        "zero advantage: re-allocation of the id cancels it",
        "FT004",
        zero_cancelled_by_reallocation,
        (Expect(ids=(1,), samples=(11,), step=3),),
        B=10,
    ),
    Case("zero advantage: three lives zero / nonzero / zero", "FT004", zero_three_lives, B=10),
    Case(
        "zero advantage: an excusal of a never-allocated id changes nothing",
        "FT004",
        zero_never_allocated,
        (Expect(ids=(1,), samples=(11,)),),
    ),
    Case("a restart re-trains with fresh ids", "FT004", restart_ok),
    Case(
        "a restart whose restored weights kept abandoned ids",
        "FT004",
        restart_leak,
        (Expect(ids=(6, 7, 8), samples=(6, 7, 8), step=2, text="abandoned work"),),
    ),
)
