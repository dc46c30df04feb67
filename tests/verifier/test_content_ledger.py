"""A follower's ledger of committed contents (FT008's repeats across the window's edge):
what it folds, what a resume drops, which epochs it keeps, and when it says it is not
whole. Checked against its definition: the samples the polls saw, of the steps before
each new window, less the steps a resume runs again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftaudit.synth import synthesize
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.fed import load_fed
from ftaudit.verifier.rules.content_ledger import ContentLedger, Contents, mix
from ftaudit.verifier.rules.ft008_data_identity import _ledger_rows
from ftaudit.verifier.session import Session
from tests.support.synth_runs import small_synth


def _samples(steps: list[int], per_step: int, epoch_of: int, *, incarnation: int = 0) -> Contents:
    """``per_step`` samples a step, each with its own content; ``epoch_of`` positions an
    epoch (content ``p mod epoch_of``, so a later epoch repeats an earlier one's)."""
    step = np.repeat(np.asarray(steps, dtype=np.int64), per_step)
    position = step * per_step + np.tile(np.arange(per_step, dtype=np.int64), len(steps))
    epoch = position // epoch_of
    fingerprint = (position % epoch_of) * 7919 + 11
    n = position.size
    return Contents(
        mix(epoch, fingerprint),
        epoch,
        fingerprint,
        position,
        position % epoch_of,
        np.zeros(n, dtype=np.int64),
        np.full(n, incarnation, dtype=np.int64),
        step,
        np.zeros(n, dtype=np.int64),
    )


def _held(ledger: ContentLedger) -> set[tuple[int, int, int]]:
    """(step, position, incarnation) of every folded sample."""
    return {
        (int(s), int(p), int(i))
        for lv in ledger.levels
        for s, p, i in zip(lv.step, lv.position, lv.incarnation, strict=True)
    }


def _saw(ledger: ContentLedger, window: Contents) -> None:
    ledger.saw(window, by_position=False)


def _polled(
    steps: int, per_step: int, epoch_of: int, *, by_position: bool = False
) -> ContentLedger:
    """A ledger after a poll at every step ``1 .. steps``, each window one new step."""
    ledger = ContentLedger()
    ledger.before(0)
    for since in range(1, steps + 1):
        ledger.saw(_samples([since - 1], per_step, epoch_of), by_position=by_position)
        ledger.before(since + 1)
    return ledger


def test_a_poll_folds_the_steps_its_window_no_longer_holds() -> None:
    ledger = ContentLedger()
    ledger.before(0)
    window = _samples([0, 1, 2], 4, 1_000)
    assert ledger.holds(window, by_position=False)  # from step 0: whole
    _saw(ledger, window)
    ledger.before(3)  # the window holds steps 2.. again
    assert {s for s, _, _ in _held(ledger)} == {0, 1}
    _saw(ledger, _samples([2, 3, 4], 4, 1_000))
    ledger.before(5)
    assert sorted(_held(ledger)) == sorted({(s, s * 4 + k, 0) for s in range(4) for k in range(4)})


def test_a_resume_drops_the_steps_its_incarnation_runs_again() -> None:
    ledger = ContentLedger()
    ledger.before(0)
    for since in range(1, 12):
        _saw(ledger, _samples([since - 1, since], 2, 1_000))
        ledger.before(since + 1)
    assert max(s for s, _, _ in _held(ledger)) == 10
    ledger.before(6)  # resumed from the checkpoint at step 5: steps 5.. are run again
    assert {s for s, _, _ in _held(ledger)} == set(range(5))
    assert ledger.top == 4


@pytest.mark.parametrize("by_position", [False, True])
def test_lookups_find_every_folded_sample_of_a_content(by_position: bool) -> None:
    # epochs of 8 positions, one a step: each content is fed once an epoch
    ledger = _polled(39, 8, 8, by_position=by_position)
    if not by_position:  # by hash, each level is sorted; by position, as it came
        assert all(np.all(lv.mixed[1:] >= lv.mixed[:-1]) for lv in ledger.levels)
    again = _samples([38], 8, 8)
    found = ledger.matching(again)
    assert found is not None
    hit, held = found
    assert hit.all() and sorted(held.position.tolist()) == list(range(38 * 8, 39 * 8))
    # epoch 36 is before the one before the last window's (38): dropped
    assert ledger.matching(_samples([36], 8, 8)) is None
    # the same contents in epoch 39: another epoch, no repeat
    assert ledger.matching(_samples([39], 8, 8)) is None


def test_folds_are_merged_into_few_levels() -> None:
    ledger = _polled(100, 4, 1_000_000)
    sizes = [len(lv) for lv in ledger.levels]
    assert sum(sizes) == 100 * 4
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 8, sizes


def test_epochs_before_the_one_before_the_window_are_dropped() -> None:
    ledger = _polled(19, 4, 8)  # an epoch every two steps
    epochs = {int(e) for lv in ledger.levels for e in lv.epoch}
    # the last window (step 18) is in epoch 9: epochs from 8 on are kept
    assert min(epochs) >= ledger.kept_from == 8
    assert ledger.whole


def test_a_window_back_in_an_epoch_it_dropped_is_not_held() -> None:
    ledger = _polled(19, 4, 8)
    ledger.before(3)  # resumed from step 2, in epoch 1: the ledger kept epochs 7.. only
    assert not ledger.holds(_samples([2, 3], 4, 8, incarnation=1), by_position=False)
    assert ledger.holds(_samples([19, 20], 4, 8), by_position=False)


def test_a_manifest_that_came_makes_it_look_up_by_position_once_refolded() -> None:
    ledger = ContentLedger()
    ledger.before(0)
    _saw(ledger, _samples([0], 4, 1_000))
    ledger.before(2)
    window = _samples([1], 4, 1_000)
    assert ledger.holds(window, by_position=False)
    assert not ledger.holds(window, by_position=True)
    ledger.refold(0, _samples([0], 4, 1_000), by_position=True)
    assert ledger.holds(window, by_position=True)
    found = ledger.matching(_samples([0], 4, 1_000))  # the same positions again
    assert found is not None and found[0].all()


@pytest.mark.parametrize("since", [2, 10])
def test_a_follower_attached_late_has_not_seen_the_steps_before_it(since: int) -> None:
    ledger = ContentLedger()
    ledger.before(since)
    window = _samples([since - 1, since], 2, 1_000)
    assert not ledger.holds(window, by_position=False)
    # what FT008 reads from the log once makes it whole
    ledger.refold(0, _samples(list(range(since - 1)), 2, 1_000), by_position=False)
    assert ledger.holds(window, by_position=False)
    _saw(ledger, window)
    ledger.before(since + 2)
    assert {s for s, _, _ in _held(ledger)} == set(range(since + 1))


@pytest.mark.parametrize("by_position", [False, True])
def test_random_polls_and_resumes_hold_what_the_definition_says(by_position: bool) -> None:
    """Polls every 1-3 steps, windows from the step before, resumes from a random earlier
    step: the ledger holds the samples of every step before the window's edge, of the
    incarnation that committed it last."""
    rng = np.random.default_rng(7)
    ledger = ContentLedger()
    ledger.before(0)
    committed: dict[int, int] = {}  # step -> incarnation
    incarnation, step, since = 0, 0, 0
    for _ in range(120):
        if rng.random() < 0.1 and step > 3:
            resume = int(rng.integers(0, step - 1))
            incarnation += 1
            step = since = resume + 1
            ledger.before(since)
            committed = {s: i for s, i in committed.items() if s < since}
            continue
        n = int(rng.integers(1, 4))
        new = list(range(step, step + n))
        for s in new:
            committed[s] = incarnation
        shown = [s for s in range(max(since - 1, 0), step + n) if s in committed]
        window = Contents.joined(
            [_samples([s], 3, 10_000, incarnation=committed[s]) for s in shown]
        )
        assert ledger.holds(window, by_position=by_position)
        ledger.saw(window, by_position=by_position)
        step += n
        since = step
        ledger.before(since)
        expected = {
            (s, s * 3 + k, i) for s, i in committed.items() if s < since - 1 for k in range(3)
        }
        assert _held(ledger) == expected
        # a repeat of every window position (by position) or content (by hash) is found
        again = _samples(sorted({s for s, _, _ in expected})[-2:], 3, 10_000)
        found = ledger.matching(again)
        assert (found is not None) == bool(expected)
        assert found is None or found[0].all()


def test_the_ranks_of_one_cell_are_taken_in_once(tmp_path: Path) -> None:
    """Every rank of a cell logs the cell's rows: the ledger takes each feeding once, and
    only the steps from the window's edge on."""
    run = synthesize(tmp_path / "run", small_synth(6, ranks=3, retries=1)).run_dir
    with Session.open(run) as session:
        fed = load_fed(RunContext(session))
        taken = _ledger_rows(fed, 0)
        assert len(fed) == 3 * int(taken.sum())
        # the same positions, attempts and cells as every rank fed
        at = fed.spelled(np.flatnonzero(taken))
        every = fed.spelled(np.arange(len(fed)))
        once = set(zip(at.key.tolist(), at.cell.tolist(), at.position.tolist(), strict=True))
        assert len(once) == at.key.size
        assert once == set(
            zip(every.key.tolist(), every.cell.tolist(), every.position.tolist(), strict=True)
        )
        steps = np.asarray([s for _, s, _ in fed.keys])[at.key]
        later = fed.spelled(np.flatnonzero(_ledger_rows(fed, 3)))
        assert set(np.asarray([s for _, s, _ in fed.keys])[later.key].tolist()) == {3, 4, 5}
        assert int(_ledger_rows(fed, 3).sum()) == int((steps >= 3).sum())
