"""The witness ring's arithmetic (SPEC §2), as every writer of ``witness_allocated`` follows it.

Stated once here for the trainer hooks' allocator, the synthetic run generator and the
tests. The verifier keeps a deliberately independent statement (``verifier/ring.py``): it
checks the writers, so it must not share their arithmetic, or a slip here would agree
with itself there.
"""

from __future__ import annotations

import math

KEEP_FRACTION = 0.7
"""The active window holds the last ``floor(0.7 * B)`` allocated slots."""


def keep_size(buffer_size: int) -> int:
    """``keep = floor(0.7 * B)``: how many recently allocated slots stay uncleared."""
    return math.floor(KEEP_FRACTION * buffer_size)


def max_ids_per_step(buffer_size: int) -> int:
    """``B - keep``: the most ids one attempt may allocate for the ring to stay exact (a
    retry whose ranks cleared the discarded attempt's stale slots has the budget again)."""
    return buffer_size - keep_size(buffer_size)


def min_buffer_size(ids_per_step: int) -> int:
    """The smallest ``B`` whose ``B - keep`` admits ``ids_per_step`` ids in one step."""
    size = max(1, math.floor(ids_per_step / (1 - KEEP_FRACTION)) - 2)
    while max_ids_per_step(size) < ids_per_step:
        size += 1
    return size


def stale_arc(counter_after: int, buffer_size: int) -> tuple[int, int]:
    """``(first slot, count)`` of the slots to zero after an allocation that left the
    counter at ``counter_after``: every slot outside the last ``min(keep, counter)``."""
    if counter_after <= 0:
        return 0, 0
    kept = min(keep_size(buffer_size), counter_after, buffer_size)
    return counter_after % buffer_size, buffer_size - kept
