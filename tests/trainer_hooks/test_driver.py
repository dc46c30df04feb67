"""The driver facade: acceptance policy, allocation events, step ends, resume, checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.eventlog import (
    AttemptEnd,
    CheckpointRef,
    CheckpointSaved,
    RankOutcome,
    RunFinished,
    RunStarted,
    StepEnd,
    WitnessAllocated,
    connect,
    read_records,
)
from ftaudit.trainer_hooks import DriverSession, WitnessIdAllocator, errored, ranks, should_retry
from ftaudit.verifier import verify

N, D, R = "normal", "discarded_should_retry", errored()


@pytest.mark.parametrize(
    ("cells", "retry"),
    [
        ({0: ranks(N, N), 1: ranks(N, N)}, False),
        ({0: ranks(N, N), 1: R}, False),  # errored + normal: accepted
        ({0: R, 1: R}, True),  # every alive cell errored
        ({0: ranks(N, D), 1: ranks(N, N)}, True),  # any cell discarded
        ({0: ranks(D), 1: R}, True),
        ({}, True),
    ],
)
def test_miles_policy(cells: dict, retry: bool) -> None:
    assert should_retry(cells) is retry


def _events(run_dir: Path, kind: type) -> list:
    return [r for r in read_records(run_dir) if isinstance(r.event, kind)]


def test_a_run_with_a_retry(tmp_path: Path) -> None:
    driver = DriverSession.start(tmp_path, buffer_size=100, dataset_size=1000)
    assert (driver.incarnation, driver.first_step, driver.resume_stale_ids) == (0, 0, [])
    info0 = driver.allocate(0, 0, range(10))
    assert driver.end_attempt(0, 0, {0: ranks(N), 1: ranks(D)}) is False
    info1 = driver.allocate(0, 1, range(10))  # the retry gets fresh ids
    assert set(info0.witness_ids).isdisjoint(info1.witness_ids)
    assert driver.end_attempt(0, 1, {0: ranks(N), 1: R}) is True
    driver.finish()

    allocs = [r.event for r in _events(tmp_path, WitnessAllocated)]
    assert [(e.step, e.attempt, e.counter_after) for e in allocs] == [(0, 0, 10), (0, 1, 20)]
    ends = [r.event for r in _events(tmp_path, AttemptEnd)]
    assert [(e.attempt, e.accepted) for e in ends] == [(0, False), (1, True)]
    (step_end,) = [r.event for r in _events(tmp_path, StepEnd)]
    assert (step_end.step, step_end.accepted_attempt) == (0, 1)
    assert step_end.cells[1].errored and step_end.cells[0].ranks == [RankOutcome.NORMAL]
    assert len(_events(tmp_path, RunFinished)) == 1


def test_allocation_over_b_minus_keep_is_refused(tmp_path: Path) -> None:
    driver = DriverSession.start(tmp_path, buffer_size=10)
    with pytest.raises(ValueError, match=r"at most 3 per attempt.*at least 11"):
        driver.allocate(0, 0, range(4))
    assert driver.allocator.counter == 0
    driver.finish()


def test_resume_continues_after_the_abandoned_counter(tmp_path: Path) -> None:
    first = DriverSession.start(tmp_path, buffer_size=100)
    for step in range(4):
        first.allocate(step, 0, range(step * 10, step * 10 + 10))
        first.end_attempt(step, 0, {0: ranks(N)})
        if step == 1:
            first.record_checkpoint(1, path="ckpt/1")
    first.flush()  # then the job dies: steps 2 and 3 are abandoned

    second = DriverSession.start(tmp_path, buffer_size=100, resume_from=1)
    assert (second.incarnation, second.first_step) == (1, 2)
    assert second.resume_from == CheckpointRef(iteration=1, incarnation=0)
    assert second.allocator.counter == 40  # the highest counter ever logged, not 20
    # B - min(keep, counter) = 60 slots from 40 (every slot outside the active window),
    # plus the slots the abandoned steps 2 and 3 allocated after the checkpoint (20..39)
    assert second.resume_stale_ids == list(range(20, 100))
    info = second.allocate(2, 0, range(20, 30))
    assert info.witness_ids == list(range(40, 50))
    second.finish()

    (resume_alloc,) = [
        r.event
        for r in _events(tmp_path, WitnessAllocated)
        if r.envelope.incarnation == 1 and r.event.num_ids == 0
    ]
    assert (resume_alloc.step, resume_alloc.attempt, resume_alloc.counter_after) == (2, 0, 40)
    assert resume_alloc.stale_ids.to_list() == list(range(40, 100))
    (started,) = [r.event for r in _events(tmp_path, RunStarted) if r.envelope.incarnation == 1]
    assert started.resumed_from == CheckpointRef(iteration=1, incarnation=0)
    marks = [r.event for r in _events(tmp_path, CheckpointSaved)]
    assert [(m.iteration, m.complete) for m in marks] == [(1, True)]

    with connect(tmp_path) as con:
        rows = con.execute(
            "SELECT incarnation, counter_after FROM witness_allocated"
            " ORDER BY counter_after, incarnation"
        ).fetchall()
    assert rows[-2:] == [(1, 40), (1, 50)]


def test_resume_from_a_missing_checkpoint_is_an_error(tmp_path: Path) -> None:
    DriverSession.start(tmp_path, buffer_size=10).finish()
    with pytest.raises(ValueError, match="no complete checkpoint at iteration 5"):
        DriverSession.start(tmp_path, buffer_size=10, resume_from=5)


def test_replayed_stream_matches_an_uninterrupted_allocator(tmp_path: Path) -> None:
    first = DriverSession.start(tmp_path, buffer_size=50)
    first.allocate(0, 0, range(5))
    first.end_attempt(0, 0, {0: ranks(N)})
    first.record_checkpoint(0)
    first.finish()
    second = DriverSession.start(tmp_path, buffer_size=50, resume_from=0)
    got = second.allocate(1, 0, range(5, 10))
    second.finish()
    reference = WitnessIdAllocator(50)
    reference.allocate(5)
    assert got == reference.allocate(5)


@pytest.mark.parametrize("declared", [True, False, None])
def test_the_order_declaration_is_recorded_as_given(tmp_path: Path, declared: bool | None) -> None:
    """Undeclared stays undeclared (None), which the verifier reads as non-deterministic
    and says so in FT005's note: the choice is visible, never silently False."""
    driver = DriverSession.start(tmp_path, buffer_size=10, deterministic_order=declared)
    driver.allocate(0, 0, [0, 2])  # a hole at sample 1
    driver.end_attempt(0, 0, {0: ranks(N)})
    driver.finish()
    (started,) = [r.event for r in _events(tmp_path, RunStarted)]
    assert started.deterministic_order is declared
    (result,) = verify(tmp_path, select=["FT005"]).results
    (hole,) = result.violations
    assert hole.severity.value == ("error" if declared else "warning"), hole.message
    assert ("does not declare whether" in result.note) is (declared is None), result.note
