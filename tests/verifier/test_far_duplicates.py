"""FT005 live: a sample trained again long after its step left the follower's window.

A follower's poll loads the allocations from ``T`` (the window) on. A loader whose cursor
jumps back, a shard read twice, trains samples of steps long committed: before the
follower kept a ledger of the committed stream
(:class:`~ftaudit.verifier.rules.stream_ledger.StreamLedger`), only the final verdict
found those duplicates. Here the ring is small (``B = 10``, three samples a step), so the
window leaves step 2 well before the loader jumps back to it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ftaudit.verifier import Report, Violation, verify
from ftaudit.verifier.online import OnlineVerifier
from tests.support.builder import RunBuilder
from tests.support.online_agreement import polling_folds

STEPS = 16
PER_STEP = 3
BACK_TO = 2
"""The step whose position a jumping loader goes back to."""


def _samples(step: int, jump_at: int | None) -> list[int]:
    """The samples a step trains: the stream's next three, or from ``jump_at`` on those
    of the step ``jump_at - BACK_TO`` steps earlier."""
    at = step - (jump_at - BACK_TO) if jump_at is not None and step >= jump_at else step
    return [PER_STEP * at + i for i in range(PER_STEP)]


def _run(root: Path, jump_at: int | None, poll: Callable[[], object]) -> None:
    b = RunBuilder(root, B=10, cells=1)
    run = b.start(deterministic_order=True)
    for step in range(STEPS):
        run.train(step, _samples(step, jump_at))
        run.flush()
        poll()
    run.finish()
    b.close()


def _crashed(root: Path, checkpoint: int, poll: Callable[[], object]) -> RunBuilder:
    """A first incarnation that trained steps 0-13, saved ``checkpoint`` and died."""
    b = RunBuilder(root, B=10, cells=1)
    first = b.start(deterministic_order=True)
    for step in range(14):
        first.train(step, _samples(step, None))
        if step == checkpoint:
            first.checkpoint(step)
        first.flush()
        poll()
    first.log.close()
    return b


def _duplicates(found: list[Violation] | Report) -> list[tuple[int | None, int | None]]:
    """The duplicates' (located at, shown at) steps."""
    if isinstance(found, Report):
        found = [v for r in found.results for v in r.violations]
    return sorted((v.location.step, v.shown_at) for v in found if v.kind == "duplicate_sample")


def _judged_live(online: OnlineVerifier, offline: Report) -> list[tuple[int | None, int | None]]:
    """The offline duplicates whose second training a poll judged before the run ended."""
    return [d for d in _duplicates(offline) if d[1] is not None and d[1] <= online.judged_through]


@pytest.mark.parametrize("since", [0, 10])
@pytest.mark.parametrize("jump_at", [None, 12])
def test_a_follower_finds_samples_trained_again_long_after(
    tmp_path: Path, jump_at: int | None, since: int
) -> None:
    """Followed from step 0, or attached at step 10 (the fold before its window read from
    the log once): the duplicates are found live, located at their first training as
    offline; the correct run (the twin) has none."""
    online = OnlineVerifier(tmp_path / "run", select=["FT005"], since_step=since)
    lookbacks: list[int] = []
    _run(tmp_path / "run", jump_at, polling_folds(online, lookbacks))
    live = _duplicates(online.violations)
    offline = verify(tmp_path / "run", select=["FT005"])
    expected = [(BACK_TO + k, 12 + k) for k in range(STEPS - 12)] if jump_at else []
    assert _duplicates(offline) == expected
    assert live == _judged_live(online, offline)
    assert len(live) >= (3 if jump_at else 0)
    assert max(lookbacks) > BACK_TO + 3  # the window had left the first trainings' steps
    assert online.poll().finished and online.final is not None
    assert _duplicates(online.final) == expected


@pytest.mark.parametrize("jump_after_resume", [False, True])
def test_a_resume_from_before_the_fold_drops_the_steps_it_runs_again(
    tmp_path: Path, jump_after_resume: bool
) -> None:
    """The run resumes from checkpoint 3, long after its window left it, and the resumed
    incarnation trains steps 4-9 again, the same samples (a correct replay): the ledger
    drops the abandoned steps it folded, so nothing is a duplicate (the twin). Where the
    resumed loader jumps back to step 1's samples at step 11 and reads on, that is found
    live."""
    online = OnlineVerifier(tmp_path / "run", select=["FT005"])
    folds: list[int] = []
    poll = polling_folds(online, folds)
    b = _crashed(tmp_path / "run", 3, poll)
    resumed = b.start(3, deterministic_order=True)
    for step in range(4, 15):
        jumped = jump_after_resume and step >= 11
        resumed.train(step, _samples(step - 10 if jumped else step, None))
        resumed.flush()
        poll()
    resumed.finish()
    b.close()
    assert max(folds) > 4 and min(folds[folds.index(max(folds)) :]) < 4  # moved back
    expected = [(1 + k, 11 + k) for k in range(4)] if jump_after_resume else []
    offline = verify(tmp_path / "run", select=["FT005"])
    assert _duplicates(offline) == expected
    live = _duplicates(online.violations)
    assert live == _judged_live(online, offline) and len(live) >= (2 if jump_after_resume else 0)
    assert online.poll().finished and online.final is not None
    assert _duplicates(online.final) == expected


def test_since_step_compares_with_the_loaded_steps_only(tmp_path: Path) -> None:
    """``ft-verify --since-step`` has no ledger: a duplicate of a step before its window is
    the full verification's, and its note says so; one inside the window it finds."""
    _run(tmp_path / "run", 12, lambda: None)
    late = verify(tmp_path / "run", select=["FT005"], since_step=13)
    assert _duplicates(late) == []
    assert "full ft-verify" in late.results[0].note
    near = verify(tmp_path / "run", select=["FT005"], since_step=4)
    assert _duplicates(near) == [(BACK_TO + k, 12 + k) for k in range(STEPS - 12)]


def _kinds(found: list[Violation] | Report) -> list[tuple[str, int | None]]:
    if isinstance(found, Report):
        found = [v for r in found.results for v in r.violations]
    return sorted((v.kind, v.location.step) for v in found)


@pytest.mark.parametrize("back", [1, 10])
def test_a_resumed_loader_restored_far_behind_is_one_root_cause_live_as_offline(
    tmp_path: Path, back: int
) -> None:
    """The run resumes from checkpoint 11 and its loader restarts ``back`` batches behind
    the checkpoint's position: 10 is long before the window, where the follower sees the
    checkpoint's stream and the replayed batch only in its ledger. Reported live as
    offline: once, as the resumed stream's root cause, its per-step duplicates as its
    details (before, a far restart was not found live at all)."""
    online = OnlineVerifier(tmp_path / "run", select=["FT005"])
    b = _crashed(tmp_path / "run", 11, online.poll)
    resumed = b.start(11, deterministic_order=True)
    for step in range(12, 18):
        resumed.train(step, _samples(step - back, None))
        resumed.flush()
        online.poll()
    resumed.finish()
    b.close()
    expected = [("resumed_stream_replays", 12)]
    assert _kinds(online.violations) == expected
    assert online.poll().finished and online.final is not None
    assert _kinds(online.final) == expected == _kinds(verify(tmp_path / "run", select=["FT005"]))
