"""Which allocation a counter position belongs to: the witness rule's "most recent
allocation in counter order".

Allocations cover half-open counter ranges ``[counter_after - n, counter_after)``. In a
healthy run they never overlap (the counter only grows, also across incarnations), so
each position has one owner. A resumed incarnation that re-issued ids makes ranges
overlap; the chronologically latest allocation (higher incarnation, then later in its
writer's sequence) then owns the position. FT003 reports the overlap itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ftaudit.eventlog.arrays import unique_sorted
from ftaudit.verifier.spans import Spans


@dataclass(frozen=True, eq=False)
class Owners:
    """Disjoint counter segments ``[starts, ends)``, each owned by one allocation index."""

    starts: np.ndarray
    ends: np.ndarray
    owner: np.ndarray

    def owner_of(self, positions: np.ndarray) -> np.ndarray:
        """The owning allocation index of each position, -1 where none."""
        idx = np.searchsorted(self.starts, positions, side="right") - 1
        out = np.full(positions.shape, -1, dtype=np.int64)
        ok = idx >= 0
        hit = ok.copy()
        hit[ok] = positions[ok] < self.ends[idx[ok]]
        out[hit] = self.owner[idx[hit]]
        return out

    def spans(self, mask: np.ndarray) -> Spans:
        """The positions owned by the segments selected by ``mask``."""
        return Spans.of(self.starts[mask], self.ends[mask])


def resolve(
    index: np.ndarray, starts: np.ndarray, ends: np.ndarray, recency: np.ndarray, lo: int, hi: int
) -> Owners:
    """Owners of the positions in ``[lo, hi)`` among the given allocations.

    ``recency`` orders allocations in time (larger is later); it only matters where
    ranges overlap.
    """
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    index, s, e, recency = index[keep], s[keep], e[keep], recency[keep]
    order = np.argsort(s, kind="stable")
    index, s, e, recency = index[order], s[order], e[order], recency[order]
    if s.size <= 1 or np.all(s[1:] >= e[:-1]):
        return Owners(s, e, index)
    # overlapping ranges (a re-issued id): paint elementary segments, latest wins
    bounds = unique_sorted(np.concatenate((s, e)))
    left, right = bounds[:-1], bounds[1:]
    cover = (s[:, None] <= left[None, :]) & (left[None, :] < e[:, None])
    score = np.where(cover, recency[:, None], np.iinfo(np.int64).min)
    best = np.argmax(score, axis=0)
    covered = cover.any(axis=0)
    return Owners(left[covered], right[covered], index[best[covered]])
