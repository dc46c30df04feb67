"""The allocator of SPEC §2: worked examples, errors, properties, events, rebuild from a log."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftaudit.eventlog import (
    Driver,
    IntRuns,
    ResumeIndex,
    RunLog,
    WitnessAllocated,
    read_records,
    step_context,
)
from ftaudit.trainer_hooks import (
    WitnessIdAllocator,
    WitnessInfo,
    allocator_from_index,
    keep_size,
    max_ids_per_step,
    min_buffer_size,
    witness_allocated_event,
)

# -- worked examples of SPEC §2 -------------------------------------------------------------


def test_b10_allocate_8() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    assert alloc.allocate(8) == WitnessInfo(list(range(8)), [8, 9, 0])
    assert alloc.counter == 8


def test_b10_allocate_3_three_times() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    first, second, third = (alloc.allocate(3) for _ in range(3))
    assert first == WitnessInfo([0, 1, 2], [3, 4, 5, 6, 7, 8, 9])
    assert second == WitnessInfo([3, 4, 5], [6, 7, 8, 9])
    assert third == WitnessInfo([6, 7, 8], [9, 0, 1])


def test_b5_wraps_around() -> None:
    alloc = WitnessIdAllocator(buffer_size=5)
    assert alloc.allocate(3).witness_ids == [0, 1, 2]
    assert alloc.allocate(4).witness_ids == [3, 4, 0, 1]


def test_b1_keeps_nothing() -> None:
    assert keep_size(1) == 0
    assert WitnessIdAllocator(buffer_size=1).allocate(1) == WitnessInfo([0], [0])


def test_allocate_zero_on_fresh_allocator_has_no_stale_ids() -> None:
    assert WitnessIdAllocator(buffer_size=10).allocate(0) == WitnessInfo([], [])


def test_allocate_zero_after_resume_marks_b_minus_keep_slots() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    alloc.resume(23)
    info = alloc.allocate(0)
    assert info == WitnessInfo([], [3, 4, 5])  # B - keep = 3 slots from 23 mod 10
    assert alloc.counter == 23


def test_info_is_frozen_and_hashable() -> None:
    info = WitnessInfo([1], [2])
    with pytest.raises(AttributeError):
        info.witness_ids = []  # type: ignore[misc]
    assert hash(info) == hash(WitnessInfo([1], [2]))


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, -1])
def test_buffer_size_must_be_positive(size: int) -> None:
    with pytest.raises(ValueError, match=r"buffer_size \(B\) must be positive"):
        WitnessIdAllocator(buffer_size=size)


def test_negative_num_ids_leaves_counter_unchanged() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    alloc.allocate(4)
    with pytest.raises(ValueError, match=r"num_ids \(n\) must be non-negative"):
        alloc.allocate(-1)
    assert alloc.counter == 4


def test_more_ids_than_buffer_names_the_buffer_size() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    with pytest.raises(ValueError, match=r"buffer of 10: increase the buffer size"):
        alloc.allocate(11)
    assert alloc.counter == 0


def test_resume_never_moves_backwards() -> None:
    alloc = WitnessIdAllocator(buffer_size=10)
    alloc.resume(7)
    assert alloc.resume(3) == 7
    with pytest.raises(ValueError):
        alloc.resume(-1)


@pytest.mark.parametrize("n", [1, 2, 3, 10, 299, 300, 301, 1000])
def test_min_buffer_size_is_the_smallest_that_fits(n: int) -> None:
    size = min_buffer_size(n)
    assert max_ids_per_step(size) >= n
    assert size == 1 or max_ids_per_step(size - 1) < n


# -- properties -----------------------------------------------------------------------------

buffers = st.integers(min_value=1, max_value=64)


@st.composite
def streams(draw: st.DrawFn) -> tuple[int, list[int]]:
    size = draw(buffers)
    return size, draw(st.lists(st.integers(0, size), max_size=30))


@given(streams())
def test_stale_and_active_slots_partition_the_ring(stream: tuple[int, list[int]]) -> None:
    size, counts = stream
    alloc = WitnessIdAllocator(size)
    history: list[int] = []
    for n in counts:
        info = alloc.allocate(n)
        history += info.witness_ids
        assert len(set(info.witness_ids)) == len(info.witness_ids)
        assert len(set(info.stale_ids)) == len(info.stale_ids)
        counter = alloc.counter
        if counter == 0:
            assert info.stale_ids == []
            continue
        active = history[-min(alloc.keep, counter) :] if min(alloc.keep, counter) else []
        assert set(active).isdisjoint(info.stale_ids)
        assert set(active) | set(info.stale_ids) == set(range(size))
        assert len(active) + len(info.stale_ids) == size


@given(streams(), st.integers(min_value=0, max_value=30))
def test_resumed_allocator_yields_the_same_stream(stream: tuple[int, list[int]], cut: int) -> None:
    size, counts = stream
    cut = min(cut, len(counts))
    whole = WitnessIdAllocator(size)
    expected = [whole.allocate(n) for n in counts]
    first = WitnessIdAllocator(size)
    before = [first.allocate(n) for n in counts[:cut]]
    resumed = WitnessIdAllocator(size)
    resumed.resume(first.counter)
    after = [resumed.allocate(n) for n in counts[cut:]]
    assert before + after == expected


@given(streams())
def test_ids_follow_the_counter(stream: tuple[int, list[int]]) -> None:
    size, counts = stream
    alloc = WitnessIdAllocator(size)
    total = 0
    for n in counts:
        info = alloc.allocate(n)
        assert info.witness_ids == [(total + i) % size for i in range(n)]
        total += n
        assert alloc.counter == total


# -- the allocation event -------------------------------------------------------------------


def test_event_maps_ids_to_samples_as_runs() -> None:
    alloc = WitnessIdAllocator(10)
    alloc.allocate(8)
    info = alloc.allocate(3)  # ids 8, 9, 0
    event = witness_allocated_event(
        info, [100, 101, 102], counter_after=alloc.counter, buffer_size=10, step=1, attempt=0
    )
    assert event.witness_ids == IntRuns.arc(8, 3, 10)
    assert event.witness_ids.to_list() == info.witness_ids
    assert event.sample_indices == IntRuns(starts=[100], lengths=[3])
    assert event.stale_ids.to_list() == info.stale_ids
    assert (event.num_ids, event.counter_after) == (3, 11)


def test_event_refuses_misaligned_samples() -> None:
    info = WitnessIdAllocator(10).allocate(2)
    with pytest.raises(ValueError, match="2 witness ids but 3 sample"):
        witness_allocated_event(info, [1, 2, 3], counter_after=2, buffer_size=10)


def test_million_slot_allocation_is_a_few_runs() -> None:
    size = 1 << 20
    alloc = WitnessIdAllocator(size)
    alloc.resume(size - 1000)
    info = alloc.allocate(300_000)
    event = witness_allocated_event(
        info, range(300_000), counter_after=alloc.counter, buffer_size=size, step=0, attempt=0
    )
    assert len(event.witness_ids.starts) == 2
    assert len(event.stale_ids.starts) == 1
    assert len(event.sample_indices.starts) == 1


# -- rebuilding from the log ----------------------------------------------------------------


def allocator_from_run(run_dir: Path, buffer_size: int) -> WitnessIdAllocator:
    return allocator_from_index(ResumeIndex.open(run_dir), buffer_size)


def _log_allocations(run: RunLog, alloc: WitnessIdAllocator, steps: range, n: int) -> None:
    writer = run.writer(Driver())
    for step in steps:
        info = alloc.allocate(n)
        with step_context(step, 0):
            writer.log(
                witness_allocated_event(
                    info,
                    range(step * n, step * n + n),
                    counter_after=alloc.counter,
                    buffer_size=alloc.buffer_size,
                )
            )
    writer.flush()


def test_rebuild_takes_the_highest_counter_of_any_incarnation(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = RunLog.start(run_dir, buffer_size=100)
    alloc = WitnessIdAllocator(100)
    _log_allocations(first, alloc, range(3), 10)
    first.record_checkpoint(1)
    _log_allocations(first, alloc, range(3, 6), 10)  # abandoned after checkpoint 1
    first.close()

    rebuilt = allocator_from_run(run_dir, 100)
    assert rebuilt.counter == 60  # not the checkpoint's 20: abandoned ids are never re-issued
    second = RunLog.start(run_dir, buffer_size=100, resume_from=1)
    _log_allocations(second, rebuilt, range(2, 4), 10)
    second.close()

    uninterrupted = WitnessIdAllocator(100)
    stream = [uninterrupted.allocate(10) for _ in range(8)]
    events = [r.event for r in read_records(run_dir) if isinstance(r.event, WitnessAllocated)]
    assert [e.witness_ids.to_list() for e in events] == [s.witness_ids for s in stream]
    assert allocator_from_run(run_dir, 100).counter == 80


def test_rebuild_of_empty_directory_is_fresh(tmp_path: Path) -> None:
    assert allocator_from_run(tmp_path / "nothing", 10).counter == 0


def test_rebuild_refuses_another_buffer_size(tmp_path: Path) -> None:
    RunLog.start(tmp_path, buffer_size=100).close()
    with pytest.raises(ValueError, match="buffer size"):
        allocator_from_run(tmp_path, 50)


def test_rebuild_of_a_run_without_durable_events_is_fresh(tmp_path: Path) -> None:
    (tmp_path / "events" / "driver.i0.p1.abcd").mkdir(parents=True)
    assert allocator_from_run(tmp_path, 10).counter == 0
