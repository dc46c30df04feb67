"""The generator's run-based allocator and slot sets agree with the real ones id for id."""

from __future__ import annotations

import random

import pytest

from ftaudit.eventlog import IntRuns
from ftaudit.eventlog.ring import max_ids_per_step
from ftaudit.synth import RunRing
from ftaudit.synth.slots import SlotSet
from ftaudit.trainer_hooks.allocator import WitnessIdAllocator


@pytest.mark.parametrize("B", [1, 5, 10, 64, 1000])
def test_run_ring_matches_the_allocator(B: int) -> None:
    rng = random.Random(B)
    real, mine = WitnessIdAllocator(B), RunRing(B)
    for _ in range(200):
        if rng.random() < 0.05:
            jump = real.counter + rng.randrange(0, 2 * B)
            real.resume(jump)
            mine.resume(jump)
        n = rng.randrange(0, max_ids_per_step(B) + 1)
        info = real.allocate(n)
        alloc = mine.allocate(n)
        assert alloc.witness_ids.to_list() == info.witness_ids
        assert alloc.stale_ids.to_list() == info.stale_ids
        assert alloc.counter_after == real.counter == mine.counter
        assert alloc.num_ids == n


def test_run_ring_spec_examples() -> None:
    ring = RunRing(10)
    first = ring.allocate(8)
    assert first.witness_ids.to_list() == list(range(8))
    assert first.stale_ids.to_list() == [8, 9, 0]
    ring = RunRing(10)
    stale = [ring.allocate(3).stale_ids.to_list() for _ in range(3)]
    assert stale == [list(range(3, 10)), [6, 7, 8, 9], [9, 0, 1]]
    with pytest.raises(ValueError, match="must be positive"):
        RunRing(0)
    with pytest.raises(ValueError, match="non-negative"):
        RunRing(4).allocate(-1)


def test_resume_never_moves_backwards() -> None:
    ring = RunRing(10, counter=7)
    ring.resume(3)
    assert ring.counter == 7


def _members(s: SlotSet) -> set[int]:
    return {i for a, b in s.intervals for i in range(a, b)}


def test_slot_set_algebra_matches_python_sets() -> None:
    rng = random.Random(3)
    for _ in range(300):
        xs = {rng.randrange(40) for _ in range(rng.randrange(25))}
        ys = {rng.randrange(40) for _ in range(rng.randrange(25))}
        a = SlotSet.from_runs(IntRuns.from_ids(xs))
        b = SlotSet.from_runs(IntRuns.from_ids(ys))
        assert _members(a | b) == xs | ys
        assert _members(a - b) == xs - ys
        assert _members(a & b) == xs & ys
        assert len(a) == len(xs)
        assert (a | b).to_runs() == IntRuns.from_ids(xs | ys)
