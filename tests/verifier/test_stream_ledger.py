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

from collections.abc import Callable
from pathlib import Path

import pytest

from ftaudit.eventlog import IntRuns
from ftaudit.verifier import Report, verify
from ftaudit.verifier.context import Allocation
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.rules.stream_ledger import StreamLedger
from tests.support.builder import RunBuilder

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


def _polling(online: OnlineVerifier, folds: list[int]) -> Callable[[], None]:
    """A poll of ``online`` that appends where its ledger's fold ends, once it has one."""

    def poll() -> None:
        online.poll()
        ledger = online._cache.states.get(StreamLedger)
        if ledger is not None:
            folds.append(ledger.folded_upto)

    return poll


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
    _run(tmp_path / "run", wrong_at, _polling(online, lookbacks))
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
    assert ledger.whole and ledger.folded_upto > 0
    assert online.poll().finished and online.final is not None
    assert _wrong(online.final) == _wrong(verify(tmp_path / "run", select=["FT008"]))


@pytest.mark.parametrize("wrong", [False, True])
def test_a_resume_from_before_the_fold_reads_it_from_the_log_once(
    tmp_path: Path, wrong: bool
) -> None:
    """The run resumes from checkpoint 3, long after its window left it: the window moves
    back into the ledger's fold, which is read again from the log (the abandoned steps
    after 3 no longer count), and the loader the resumed incarnation saves with
    checkpoint 7 is judged live."""
    online = OnlineVerifier(tmp_path / "run", select=["FT008"])
    folds: list[int] = []
    poll = _polling(online, folds)
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


def _alloc(incarnation: int, step: int, first: int, n: int = PER_STEP) -> Allocation:
    runs = IntRuns(starts=[first], lengths=[n])
    return Allocation(0, incarnation, step, 0, n, first + n, runs, runs, IntRuns(), 0, "d", "s")


def test_the_ledger_folds_the_steps_its_window_left() -> None:
    ledger = StreamLedger()
    ledger.take(0, [_alloc(0, s, 3 * s) for s in range(4)])
    ledger.take(2, [_alloc(0, s, 3 * s) for s in range(2, 6)])
    assert ledger.whole and ledger.folded_upto == 2 and ledger.folded_max == 5
    assert ledger.high(0, 3) == 11
    assert ledger.high(0, 1) is None  # folded together with step 1's successors
    # a resume re-committed step 5: the checkpoint's steps are not all of one incarnation
    ledger.take(2, [*(_alloc(0, s, 3 * s) for s in range(2, 6)), _alloc(1, 5, 15)])
    assert ledger.high(0, 5) is None
    # the fold keeps the largest position, not the last step's
    unordered = StreamLedger()
    unordered.take(0, [_alloc(0, 0, 30), _alloc(0, 1, 0), _alloc(0, 2, 3)])
    unordered.take(2, [_alloc(0, 2, 3)])
    assert unordered.folded_max == 32 and unordered.high(0, 2) == 32


def test_a_window_moved_back_into_the_fold_or_a_late_attach_is_behind_the_ledger() -> None:
    moved_back = StreamLedger()
    moved_back.take(0, [_alloc(0, 0, 0)])
    moved_back.take(4, [_alloc(0, 4, 12)])
    moved_back.take(2, [_alloc(1, 3, 9)])  # a resume from a checkpoint before T
    assert not moved_back.whole
    late = StreamLedger()
    assert late.behind(5)
    late.take(5, [_alloc(0, 6, 18)])
    assert not late.whole
    # what a follower does: the fold before the window read from the log
    late.refold(5, 14)
    late.take(5, [_alloc(0, 6, 18)])
    assert late.whole and late.high(0, 6) == 20 and not late.behind(5)
    assert moved_back.behind(2) and not StreamLedger().behind(0)
