"""The witness allocator of SPEC §2, computed on runs instead of id lists.

``trainer_hooks.WitnessIdAllocator`` returns Python lists (a step may hold a third of a
million stale ids), which is right for a trainer but too slow to write ten thousand
steps per second. The generator needs only the arcs; the formulas themselves are the
hooks' (:mod:`ftaudit.eventlog.ring`), and ``tests/synth`` checks both agree id for id.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.ring import keep_size, stale_arc


@dataclass(frozen=True)
class AllocationArcs:
    """One allocation as arcs: its ids in order, its stale slots, the counter after it."""

    witness_ids: IntRuns
    stale_ids: IntRuns
    counter_after: int

    @property
    def num_ids(self) -> int:
        return len(self.witness_ids)


class RunRing:
    """A witness allocator whose results are :class:`IntRuns` arcs; state is one counter."""

    def __init__(self, buffer_size: int, counter: int = 0) -> None:
        if buffer_size <= 0:
            raise ValueError(f"buffer_size (B) must be positive, got {buffer_size}")
        self.buffer_size = buffer_size
        self.keep = keep_size(buffer_size)
        self.counter = counter

    def allocate(self, num_ids: int) -> AllocationArcs:
        if num_ids < 0:
            raise ValueError(f"num_ids (n) must be non-negative, got {num_ids}")
        if num_ids > self.buffer_size:
            raise ValueError(f"cannot allocate {num_ids} ids from a ring of {self.buffer_size}")
        B = self.buffer_size
        ids = IntRuns.arc(self.counter, num_ids, B)
        after = self.counter + num_ids
        stale = IntRuns.arc(*stale_arc(after, B), B)
        self.counter = after
        return AllocationArcs(ids, stale, after)

    def resume(self, counter: int) -> None:
        """Continue from ``counter``; like the real allocator, never move backwards."""
        self.counter = max(self.counter, counter)
