"""The allocator's arithmetic (SPEC §2), restated for the verifier in counter positions.

A counter position ``p`` (the p-th id ever allocated) sits in ring slot ``p mod B``.
This is a deliberately independent copy of :mod:`ftaudit.eventlog.ring`, the statement the
hooks and the synthetic generator follow: the verifier checks those writers, so it must not
share their arithmetic, or a slip there would agree with itself here. Keep the two equal by
hand; ``tests/verifier/test_ring_copies.py`` compares them.
"""

from __future__ import annotations

import math

import numpy as np

from ftaudit.eventlog.intruns import IntRuns

KEEP_FRACTION = 0.7


def keep_size(buffer_size: int) -> int:
    """``keep = floor(0.7 * B)``: the active window's largest size."""
    return math.floor(KEEP_FRACTION * buffer_size)


def max_per_step(buffer_size: int) -> int:
    """``B - keep``: the most ids one step may allocate for the ring to stay exact."""
    return buffer_size - keep_size(buffer_size)


def stale_runs(counter: int, buffer_size: int) -> IntRuns:
    """The stale slots after an allocation that left the counter at ``counter``."""
    if counter == 0:
        return IntRuns()
    count = buffer_size - min(keep_size(buffer_size), counter, buffer_size)
    return IntRuns.arc(counter % buffer_size, count, buffer_size)


def ids_runs(counter_after: int, num_ids: int, buffer_size: int) -> IntRuns:
    """The ids of an allocation of ``num_ids`` that left the counter at ``counter_after``."""
    return IntRuns.arc(counter_after - num_ids, num_ids, buffer_size)


def position_of(slots: np.ndarray, lo: int, buffer_size: int) -> np.ndarray:
    """For each slot, the one counter position in ``[lo, lo + B)`` that maps to it."""
    return lo + (slots - lo) % buffer_size
