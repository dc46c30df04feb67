"""What makes a follower's verdicts agree with the offline verifier's, and a follower that
polls a run another process is writing (the demo, the soak)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import ftaudit
from ftaudit.verifier import Report, Violation, verify
from ftaudit.verifier.online import OnlineVerifier, Poll
from ftaudit.verifier.rules.stream_ledger import StreamLedger

POLL_EVERY_S = 0.3
"""A live follower's pause between polls (what it judges does not depend on it)."""


JUDGED_LATER: tuple[str, ...] = ()
"""Findings (kinds) whose evidence may come after the last poll of a live run: none of
the follower's own. Evidence that lands after its step was judged (a resumed loader's
state, about its checkpoint's step; an asynchronous save) is judged at the poll that
reads it (:meth:`~ftaudit.verifier.context.RunContext.judges`); a defect's own late
kinds are named where it is followed (the demo's ``checkpoint_one_step_late``)."""


def finding(v: Violation) -> tuple[object, ...]:
    """A finding as the agreement compares it: rule, step and incarnation.

    Not the cell nor the kind: a rule whose baseline lies outside the incremental window
    names the other side or another cause. FT012 compares a changed parameter manifest
    with the earliest one loaded (offline, incarnation 0's; live, another cell of the
    same incarnation).
    """
    return (v.code, v.location.step, v.location.incarnation)


def findings(report: Report) -> set[tuple[object, ...]]:
    return {finding(v) for r in report.results for v in r.violations}


def without_timings(report: Report) -> dict:
    out = report.to_dict()
    for result in out["results"]:
        result.pop("seconds", None)
    return out


def check_agreement(
    run_dir: Path,
    online: OnlineVerifier,
    provisional: set[tuple[object, ...]],
    judged: Collection[tuple[int, int]],
    *,
    live_evidence_kept: bool = True,
    judged_later: Collection[str] = (),
) -> None:
    """``online`` followed ``run_dir`` to its end, finding ``provisional`` and judging the
    ``(incarnation, step)`` pairs ``judged`` before the run finished. Its final report is
    the offline one; nothing it found live is missing from the offline report (but for
    the steps a later incarnation rolled back: the offline verdict judges the committed
    history); and the offline findings at the steps judged live, whose later evidence
    (:attr:`~ftaudit.verifier.findings.Violation.shown_at`) was judged live too, were found
    live (by rule, step and incarnation: a message may name more ids once more of the run
    is known), unless ``live_evidence_kept`` is False: the run's events of steps judged live
    were removed, or evidence about them came, after the fact; findings of the kinds
    ``judged_later`` are not expected live (their evidence comes after the step)."""
    offline = verify(run_dir)
    final = online.final
    assert final is not None
    assert without_timings(final) == without_timings(offline)
    assert online.passed() == offline.passed()
    found = findings(offline)
    # no false alarm, even provisional; the offline verdict judges the committed history,
    # so a finding on a step that a later incarnation rolled back is not in it
    rolled_back = _rolled_back(run_dir)
    unconfirmed = {f for f in provisional - found if (f[2], f[1]) not in rolled_back}
    assert not unconfirmed, unconfirmed
    if not live_evidence_kept:
        return
    steps = {step for _, step in judged}
    settled = {
        finding(v)
        for r in offline.results
        for v in r.violations
        if v.kind not in judged_later
        if v.shown_at is None or v.shown_at in steps
        if (v.location.incarnation, v.location.step) in judged
        or (v.location.incarnation is None and v.location.step in steps)
    }
    assert settled <= provisional, settled - provisional


def _rolled_back(run_dir: Path) -> set[tuple[int, int]]:
    """The ``(incarnation, step)`` pairs a later incarnation rolled back."""
    with ftaudit.connect(run_dir) as con:
        rows = con.sql(
            "SELECT DISTINCT incarnation, step FROM timeline WHERE status = 'rolled_back'"
        ).fetchall()
    return {(incarnation, step) for incarnation, step in rows}


def judged_pairs(poll: Poll) -> set[tuple[int, int]]:
    """The ``(incarnation, step)`` pairs ``poll`` judged of its newest incarnation (those
    up to the checkpoint it resumed from are an older one's, not named here)."""
    if poll.judged is None or poll.incarnation is None:
        return set()
    first, last = poll.judged
    if poll.resumed_from is not None:
        first = max(first, poll.resumed_from + 1)
    return {(poll.incarnation, step) for step in range(first, last + 1)}


@contextmanager
def following(
    run_dir: Path, *, judged_later: Collection[str] = JUDGED_LATER
) -> Iterator[OnlineVerifier]:
    """A follower of ``run_dir`` polling on a thread of its own while the block runs
    (another process writes the run; the directory may not exist yet); on leaving, the
    last polls judge the finished run, and the agreement with the offline verifier is
    checked (:func:`check_agreement`): nothing found live that the offline verdict
    lacks, the final report the offline one, and every offline finding at a step judged
    live found live but those of the kinds ``judged_later`` (:data:`JUDGED_LATER`: their
    evidence comes after the step was judged). A poll's error is raised in the block's
    thread."""
    online = OnlineVerifier(run_dir)
    stop = threading.Event()
    failed: list[BaseException] = []
    live: list[set[tuple[object, ...]]] = [set()]  # what the polls before the end found
    judged: set[tuple[int, int]] = set()

    def poll() -> None:
        try:
            while not stop.is_set():
                polled = online.poll()
                if polled.finished:
                    return
                live[0] = {finding(v) for v in online.violations}
                judged.update(judged_pairs(polled))
                stop.wait(POLL_EVERY_S)
        except BaseException as exc:  # raised below, in the test's thread
            failed.append(exc)

    thread = threading.Thread(target=poll, name="follower", daemon=True)
    thread.start()
    try:
        yield online
    finally:
        stop.set()
        thread.join()
    if failed:
        raise failed[0]
    if online.final is None:
        live[0] = {finding(v) for v in online.violations}
    assert online.poll().finished, f"{run_dir}: the run did not finish"
    check_agreement(run_dir, online, live[0], judged, judged_later=judged_later)


def polling_folds(online: OnlineVerifier, folds: list[int]) -> Callable[[], None]:
    """A poll of ``online`` that appends where its stream ledger's fold ends (the window's
    first step, :class:`~ftaudit.verifier.rules.stream_ledger.StreamLedger`), once it has one."""

    def poll() -> None:
        online.poll()
        ledger = online._cache.states.get(StreamLedger)
        if ledger is not None:
            folds.append(ledger.folded_upto)

    return poll
