"""FT008's resumed loader judged by a window: a follower hears of a loader that was not
restored when the resumed incarnation logs it, not only in the final verdict.

The resumed loader's state is about its checkpoint's step, which a follower judged
before the crash; the evidence comes in a new segment of the resumed incarnation, and the
state saved with that checkpoint is in the window (the drivers' rows are read from ``T``
on, ``T`` at most the step before the resume). Here the ring is small (``B = 10``, three
samples a step), so the window begins well after step 0 when the incarnation resumes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.verifier import Report, verify
from ftaudit.verifier.incremental import select
from ftaudit.verifier.online import OnlineVerifier
from tests.support.builder import RunBuilder

PER_STEP = 3
CHECKPOINT = 9
CRASH_AFTER = 11
END = 16


def _run(root: Path, restored_at: int, poll: object = None) -> None:
    """Incarnation 0 saves its loader (at the committed stream's next position) with
    checkpoint 9 and crashes after step 11; incarnation 1 resumes from checkpoint 9 and
    logs its loader at ``restored_at``."""
    b = RunBuilder(root, B=10, cells=1)
    run = b.start(dataset_size=1000)
    for step in range(CRASH_AFTER + 1):
        run.train(step, [PER_STEP * step + i for i in range(PER_STEP)])
        if step == CHECKPOINT:
            run.loader(step, "saved", PER_STEP * (step + 1), seed=7)
            run.checkpoint(step)
        run.flush()
        if callable(poll):
            poll()
    run.log.close()
    again = b.start(resume_from=CHECKPOINT, dataset_size=1000)
    again.loader(CHECKPOINT, "resumed", restored_at, seed=7)
    for step in range(CHECKPOINT + 1, END):
        again.train(step, [PER_STEP * step + i for i in range(PER_STEP)])
        again.flush()
        if callable(poll):
            poll()
    again.finish()
    b.close()


def _not_restored(violations: object) -> list[tuple[int | None, int | None]]:
    return [
        (v.location.step, v.location.incarnation)
        for v in violations  # type: ignore[attr-defined]
        if v.kind == "loader_not_restored"
    ]


def _all(report: Report) -> list:
    return [v for r in report.results for v in r.violations]


SAVED = PER_STEP * (CHECKPOINT + 1)


@pytest.mark.parametrize("restored_at", [SAVED, SAVED + PER_STEP])
def test_a_follower_hears_of_a_loader_not_restored_when_it_resumes(
    tmp_path: Path, restored_at: int
) -> None:
    online = OnlineVerifier(tmp_path / "run", select=["FT008"])
    at_resume: list[list[tuple[int | None, int | None]]] = []

    def poll() -> None:
        polled = online.poll()
        if polled.incarnation == 1 and not at_resume:
            at_resume.append(_not_restored(polled.violations))

    _run(tmp_path / "run", restored_at, poll)
    expected = [] if restored_at == SAVED else [(CHECKPOINT, 1)]
    # found by the first poll that judged the resumed incarnation
    assert at_resume == [expected], [v.message for v in online.violations]
    assert _not_restored(online.violations) == expected
    assert online.poll().finished
    assert _not_restored(_all(verify(tmp_path / "run", select=["FT008"]))) == expected
    assert online.final is not None and _not_restored(_all(online.final)) == expected
    # the premise: the window judging the resume began after step 0
    _, window = select(tmp_path / "run", CHECKPOINT + 1)
    assert window.lookback > 0


def test_since_step_judges_the_resumed_loader_at_its_checkpoint_step(tmp_path: Path) -> None:
    _run(tmp_path / "run", SAVED + 1)
    found = [(CHECKPOINT, 1)]
    for since in (CHECKPOINT - 2, CHECKPOINT):
        report = verify(tmp_path / "run", select=["FT008"], since_step=since)
        assert _not_restored(_all(report)) == found, since
    # a later window: its step was judged before (a check of step 9 reported it)
    report = verify(tmp_path / "run", select=["FT008"], since_step=CHECKPOINT + 1)
    assert _not_restored(_all(report)) == []
