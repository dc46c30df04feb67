"""A tiny immutable set of ring slots as sorted half-open intervals.

The generator simulates the witness rows of each cell's weights with it: unions of
allocated arcs, minus stale arcs. A healthy run's rows are one or two intervals, so
every operation is a few tuple comparisons, whatever the ring size.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ftaudit.eventlog.intruns import IntRuns

Interval = tuple[int, int]


def _normalise(intervals: Iterable[Interval]) -> tuple[Interval, ...]:
    out: list[list[int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


@dataclass(frozen=True)
class SlotSet:
    """``union(range(s, e) for s, e in intervals)``, always sorted, disjoint, non-touching."""

    intervals: tuple[Interval, ...] = ()

    @classmethod
    def of(cls, intervals: Iterable[Interval]) -> SlotSet:
        return cls(_normalise(intervals))

    @classmethod
    def from_runs(cls, runs: IntRuns) -> SlotSet:
        return cls.of((s, s + n) for s, n in zip(runs.starts, runs.lengths, strict=True))

    def to_runs(self) -> IntRuns:
        return IntRuns(
            starts=[s for s, _ in self.intervals], lengths=[e - s for s, e in self.intervals]
        )

    def __len__(self) -> int:
        return sum(e - s for s, e in self.intervals)

    def __contains__(self, slot: object) -> bool:
        return isinstance(slot, int) and any(s <= slot < e for s, e in self.intervals)

    def _combine(self, other: SlotSet, keep: Callable[[bool, bool], bool]) -> SlotSet:
        bounds = sorted({b for iv in (*self.intervals, *other.intervals) for b in iv})
        pieces = [
            (lo, hi) for lo, hi in itertools.pairwise(bounds) if keep(lo in self, lo in other)
        ]
        return SlotSet.of(pieces)

    def __or__(self, other: SlotSet) -> SlotSet:
        return self._combine(other, lambda a, b: a or b)

    def __sub__(self, other: SlotSet) -> SlotSet:
        return self._combine(other, lambda a, b: a and not b)

    def __and__(self, other: SlotSet) -> SlotSet:
        return self._combine(other, lambda a, b: a and b)
