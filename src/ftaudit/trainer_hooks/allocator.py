"""The witness id allocator: a ring of ``B`` slots handed out in order (SPEC §2).

The allocator's whole state is one monotone counter, so the verifier can replay it from
the ``counter_after`` of each logged allocation, and a resumed incarnation can rebuild it
from the log instead of trusting a separate state file that a crash could leave stale.
The ring's formulas (``keep``, ``B - keep``) are stated once, in
:mod:`ftaudit.eventlog.ring`. This module is arithmetic only: reading the log at a resume is
the driver's business
(:class:`~ftaudit.eventlog.resume.ResumeIndex`, :func:`~.driver.allocator_from_index`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ftaudit.errors import UsageError
from ftaudit.eventlog.events import WitnessAllocated
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.ring import (
    KEEP_FRACTION,
    keep_size,
    max_ids_per_step,
    min_buffer_size,
    stale_arc,
)

__all__ = [
    "KEEP_FRACTION",
    "WitnessIdAllocator",
    "WitnessInfo",
    "keep_size",
    "max_ids_per_step",
    "min_buffer_size",
    "witness_allocated_event",
]


@dataclass(frozen=True)
class WitnessInfo:
    """One allocation: the ids handed out (in order) and the slots to zero after the step."""

    witness_ids: list[int]
    stale_ids: list[int]

    def __hash__(self) -> int:  # lists are unhashable; hash the content instead
        return hash((tuple(self.witness_ids), tuple(self.stale_ids)))


def _arc(start: int, count: int, ring: int) -> list[int]:
    if count <= 0:
        return []
    return ((np.arange(count, dtype=np.int64) + start) % ring).tolist()


class WitnessIdAllocator:
    """Hands out witness ids from a ring of ``buffer_size`` slots; state is one counter."""

    def __init__(self, buffer_size: int) -> None:
        if buffer_size <= 0:
            raise UsageError(f"buffer_size (B) must be positive, got {buffer_size}")
        self.buffer_size = buffer_size
        self.keep = keep_size(buffer_size)
        self._counter = 0

    @property
    def counter(self) -> int:
        """How many ids were ever allocated (the next id is ``counter mod B``)."""
        return self._counter

    def allocate(self, num_ids: int) -> WitnessInfo:
        """The next ``num_ids`` slots of the ring and the stale slots after them."""
        if num_ids < 0:
            raise UsageError(f"num_ids (n) must be non-negative, got {num_ids}")
        if num_ids > self.buffer_size:
            raise UsageError(
                f"cannot allocate {num_ids} witness ids from a buffer of {self.buffer_size}: "
                f"increase the buffer size (B); for exact results one step allocates at most "
                f"B - floor(0.7 * B) ids, so use B >= {min_buffer_size(num_ids)}"
            )
        B = self.buffer_size
        ids = _arc(self._counter, num_ids, B)
        after = self._counter + num_ids
        stale = _arc(*stale_arc(after, B), B)
        self._counter = after
        return WitnessInfo(witness_ids=ids, stale_ids=stale)

    def resume(self, counter: int) -> int:
        """Continue from ``counter`` (the highest ever logged); it never moves backwards."""
        if counter < 0:
            raise UsageError(f"counter must be non-negative, got {counter}")
        self._counter = max(self._counter, counter)
        return self._counter

    def __repr__(self) -> str:
        return f"WitnessIdAllocator(buffer_size={self.buffer_size}, counter={self._counter})"


def witness_allocated_event(
    info: WitnessInfo,
    sample_indices: Sequence[int] | np.ndarray,
    *,
    counter_after: int,
    buffer_size: int,
    step: int | None = None,
    attempt: int | None = None,
) -> WitnessAllocated:
    """The ``WitnessAllocated`` event of one allocation; the k-th id trains the k-th sample.

    Ids are stored as ``IntRuns.arc(counter_after - n, n, B)`` and stale ids as the arc
    they form, so a million ids cost a run or two, not a million values.
    """
    samples = np.asarray(sample_indices, dtype=np.int64).reshape(-1)
    n = len(info.witness_ids)
    if samples.size != n:
        raise UsageError(f"{n} witness ids but {samples.size} sample indices")
    if (samples < 0).any():
        raise UsageError("sample indices must be non-negative")
    stale = (
        IntRuns.arc(info.stale_ids[0], len(info.stale_ids), buffer_size)
        if info.stale_ids
        else IntRuns()
    )
    return WitnessAllocated(
        step=step,
        attempt=attempt,
        num_ids=n,
        counter_after=counter_after,
        witness_ids=IntRuns.arc(counter_after - n, n, buffer_size),
        sample_indices=IntRuns.from_sequence(samples),
        stale_ids=stale,
    )
