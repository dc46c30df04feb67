"""The allocator's arithmetic (SPEC §2), restated for the verifier in counter positions.

A counter position ``p`` (the p-th id ever allocated) sits in ring slot ``p mod B``.
The verifier imports nothing from ``trainer_hooks``: it checks the hooks, so it keeps
its own statement of the rules they must follow.
"""

from __future__ import annotations

import math

import numpy as np

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.verifier.spans import Spans

KEEP_FRACTION = 0.7


def keep_size(buffer_size: int) -> int:
    """``keep = floor(0.7 * B)``: the active window's largest size."""
    return math.floor(KEEP_FRACTION * buffer_size)


def max_per_step(buffer_size: int) -> int:
    """``B - keep``: the most ids one step may allocate for the ring to stay exact."""
    return buffer_size - keep_size(buffer_size)


def window(counter: int, buffer_size: int) -> tuple[int, int]:
    """The active window after ``counter`` ids: the last ``min(keep, counter)`` positions."""
    return counter - min(keep_size(buffer_size), counter), counter


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


def slots(positions: Spans, buffer_size: int) -> Spans:
    return positions.modulo(buffer_size)
