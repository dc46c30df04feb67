"""FT008's saved loader positions judged by a window: a follower's ledger of the committed
stream, and ``--since-step``.

A loader state saved with checkpoint ``c`` must read next one past the largest position a
committed step up to ``c`` consumed. Before the ledger an incremental window checked no
saved loader at all: the demo's ``wrong_items_after_resume`` saved two wrong positions
that a follower only heard of in the final verdict. Here the ring is small (``B = 10``,
three samples a step), so the window begins well after step 0 (``T > 0``) by the time the
checkpoints are saved, and the follower needs what it folded from earlier polls.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftaudit.eventlog import IntRuns
from ftaudit.verifier import Report, verify
from ftaudit.verifier.context import Allocation
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.rules.stream_ledger import StreamLedger, TrainedSpans
from ftaudit.verifier.spans import Spans
from tests.support.builder import RunBuilder
from tests.support.online_agreement import polling_folds

STEPS = 16
PER_STEP = 3
CHECKPOINTS = (3, 7, 11)


def _run(root: Path, wrong_at: int | None, poll: object = None) -> None:
    """Steps of three samples each, a checkpoint and its saved loader every 4 steps; the
    one saved at ``wrong_at`` reads one step behind."""
    b = RunBuilder(root, B=10, cells=1)
    run = b.start(deterministic_order=True, dataset_size=1000)
    for step in range(STEPS):
        run.train(step, [PER_STEP * step + i for i in range(PER_STEP)])
        if step in CHECKPOINTS:
            position = PER_STEP * (step + 1) - (PER_STEP if step == wrong_at else 0)
            run.loader(step, "saved", position)
            run.checkpoint(step)
        run.flush()
        if callable(poll):
            poll()
    run.finish()
    b.close()


def _wrong(report: Report) -> list[int | None]:
    return [
        v.location.step
        for r in report.results
        for v in r.violations
        if v.kind == "loader_state_wrong"
    ]


@pytest.mark.parametrize("wrong_at", [None, 3, 11])
def test_a_follower_judges_each_saved_loader_live_as_the_whole_log(
    tmp_path: Path, wrong_at: int | None
) -> None:
    online = OnlineVerifier(tmp_path / "run", select=["FT008"])
    lookbacks: list[int] = []
    _run(tmp_path / "run", wrong_at, polling_folds(online, lookbacks))
    live = [v.location.step for v in online.violations if v.kind == "loader_state_wrong"]
    expected = [] if wrong_at is None else [wrong_at]
    assert live == expected, [v.message for v in online.violations]
    assert max(lookbacks) > 0  # the window had left step 0: the ledger's fold was used
    assert online.poll().finished
    assert _wrong(verify(tmp_path / "run", select=["FT008"])) == expected
    assert online.final is not None and _wrong(online.final) == expected


@pytest.mark.parametrize("since", [5, 11])
@pytest.mark.parametrize("wrong_at", [None, 11])
def test_a_follower_attached_late_reads_the_fold_from_the_log_once(
    tmp_path: Path, wrong_at: int | None, since: int
) -> None:
    """Attached at step ``since``, after the window left step 0: the committed stream
    before its window is read from the drivers' log at its first poll, and the saved
    loaders from ``since`` on are judged live (before, the final verdict's)."""
    online = OnlineVerifier(tmp_path / "run", select=["FT008"], since_step=since)
    _run(tmp_path / "run", wrong_at, online.poll)
    live = [v.location.step for v in online.violations if v.kind == "loader_state_wrong"]
    assert live == ([] if wrong_at is None else [wrong_at])
    ledger = online._cache.states[StreamLedger]
    assert ledger.started and ledger.folded_upto > 0
    assert online.poll().finished and online.final is not None
    assert _wrong(online.final) == _wrong(verify(tmp_path / "run", select=["FT008"]))


@pytest.mark.parametrize("wrong", [False, True])
def test_a_resume_from_before_the_fold_reads_it_from_the_log_once(
    tmp_path: Path, wrong: bool
) -> None:
    """The run resumes from checkpoint 3, long after its window left it: the window moves
    back into the ledger's fold, which drops the steps the window holds again (the
    abandoned steps after 3 no longer count), and the loader the resumed incarnation saves
    with checkpoint 7 is judged live."""
    online = OnlineVerifier(tmp_path / "run", select=["FT008"])
    folds: list[int] = []
    poll = polling_folds(online, folds)
    b = RunBuilder(tmp_path / "run", B=10, cells=1)
    first = b.start(deterministic_order=True, dataset_size=1000)
    for step in range(14):
        # the abandoned stretch reads far ahead: a fold that kept it would be wrong
        first.train(step, [PER_STEP * step + i + (100 if step > 3 else 0) for i in range(PER_STEP)])
        if step == 3:
            first.loader(step, "saved", PER_STEP * 4)
            first.checkpoint(step)
        first.flush()
        poll()
    first.log.close()
    resumed = b.start(3, deterministic_order=True, dataset_size=1000)
    for step in range(4, 10):
        resumed.train(step, [PER_STEP * step + i for i in range(PER_STEP)])
        if step == 7:
            resumed.loader(step, "saved", PER_STEP * (8 if not wrong else 7))
            resumed.checkpoint(step)
        resumed.flush()
        poll()
    resumed.finish()
    b.close()
    live = [v.location.step for v in online.violations if v.kind == "loader_state_wrong"]
    assert live == ([7] if wrong else [])
    assert max(folds) > 4 and folds[-1] < max(folds)  # moved back into the fold
    assert online.poll().finished and online.final is not None
    assert _wrong(online.final) == live


def test_since_step_checks_a_saved_loader_only_where_every_driver_is_loaded(
    tmp_path: Path,
) -> None:
    _run(tmp_path / "run", wrong_at=11)
    # at step 11 the window begins after step 0 and no ledger exists: not judged, no alarm
    assert _wrong(verify(tmp_path / "run", select=["FT008"], since_step=11)) == []
    # from step 3 the window holds every driver whole (T = 0): judged as offline
    assert _wrong(verify(tmp_path / "run", select=["FT008"], since_step=2)) == [11]


def _spans(*allocations: tuple[int, int, int]) -> TrainedSpans:
    """The committed spans of allocations of (incarnation, step, first sample), three
    samples each."""
    runs = [IntRuns(starts=[first], lengths=[PER_STEP]) for _, _, first in allocations]
    return TrainedSpans.of(
        [
            Allocation(0, inc, step, 0, PER_STEP, first + PER_STEP, r, r, IntRuns(), 0, "d", "s")
            for (inc, step, first), r in zip(allocations, runs, strict=True)
        ]
    )


def test_the_ledger_folds_the_steps_its_window_left() -> None:
    ledger = StreamLedger()
    ledger.take(0, _spans(*((0, s, 3 * s) for s in range(4))))
    ledger.take(2, _spans(*((0, s, 3 * s) for s in range(2, 6))))
    assert ledger.folded_upto == 2 and ledger.covered == Spans.of([0], [6])
    assert ledger.high(0, 3) == 11
    assert ledger.high(0, 1) == 5  # a folded step: the fold keeps every step's spans
    # a resume re-committed step 5: the checkpoint's steps are not all of one incarnation
    ledger.take(2, _spans(*((0, s, 3 * s) for s in range(2, 6)), (1, 5, 15)))
    assert ledger.high(0, 5) is None
    # the largest position, not the last step's
    unordered = StreamLedger()
    unordered.take(0, _spans((0, 0, 30), (0, 1, 0), (0, 2, 3)))
    unordered.take(2, _spans((0, 2, 3)))
    assert unordered.high(0, 2) == 32 and unordered.high(0, 1) == 32


def test_a_window_moved_back_drops_the_fold_it_holds_again_and_a_late_attach_is_behind() -> None:
    moved_back = StreamLedger()
    moved_back.take(0, _spans((0, 0, 0)))
    moved_back.take(4, _spans((0, 4, 12)))
    moved_back.take(2, _spans((1, 3, 9)))  # a resume from a checkpoint before T
    assert moved_back.all_folded().step.tolist() == [0] and moved_back.high(1, 3) == 11
    late = StreamLedger()
    assert late.behind(5) and not StreamLedger().behind(0)
    # what a follower does: the fold before the window read from the log
    late.refold(5, _spans(*((0, s, 3 * s) for s in range(5))))
    late.take(5, _spans((0, 6, 18)))
    assert late.high(0, 6) == 20 and late.high(0, 2) == 8 and not late.behind(5)


def _rows(rows: list[tuple[int, int, int]]) -> TrainedSpans:
    """Spans of (start, end, step), attempt 0, incarnation 0."""
    start, end, step = (np.asarray(c, dtype=np.int64) for c in zip(*rows, strict=True))
    zero = np.zeros_like(step)
    return TrainedSpans(start, end, step, zero, zero)


def test_the_ledger_folds_poll_after_poll_and_looks_up_what_a_window_trained_again() -> None:
    ledger = StreamLedger()
    stream = [(3 * s, 3 * s + 3, s) for s in range(40)]
    for lookback in range(0, 30, 3):  # a poll every 3 steps, the window 10 steps long
        ledger.take(lookback, _rows([r for r in stream if r[2] < lookback + 10]))
        assert sorted(ledger.all_folded().step.tolist()) == list(range(lookback))
        assert ledger.covered == Spans.of([0], [3 * lookback])
    assert len(ledger.folded) == 1
    hits = ledger.trained_before(Spans.of([10, 40], [11, 100]))
    assert hits.step.tolist() == [3, *range(13, 27)]
    assert len(ledger.trained_before(Spans.of([81], [200]))) == 0  # after the fold
    assert ledger.high(0, 5) == 17 and ledger.high(0, 30) == 92 and ledger.high(1, 30) is None
