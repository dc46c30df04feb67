"""Sets of integers as sorted half-open spans, with vectorised set algebra.

Witness id sets are a few contiguous runs of the ring even when they hold a million ids
(:class:`ftaudit.eventlog.IntRuns`), so the verifier never expands them: union,
difference and intersection work on span boundaries with numpy, costing O(spans log
spans), not O(ids). Only ids that end up in a report are expanded, and only a few.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ftaudit.eventlog.arrays import list_lengths, list_values, unique_sorted
from ftaudit.eventlog.intruns import IntRuns

_I64 = np.int64


@dataclass(frozen=True, eq=False)
class Spans:
    """A set of integers: ``union(range(s, e) for s, e in zip(starts, ends))``.

    Always canonical: sorted, non-empty, neither overlapping nor touching spans.
    Build one with :meth:`of` or :meth:`from_runs`, which normalise.
    """

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def empty(cls) -> Spans:
        return cls(np.empty(0, _I64), np.empty(0, _I64))

    @classmethod
    def of(cls, starts: Iterable[int] | np.ndarray, ends: Iterable[int] | np.ndarray) -> Spans:
        """Normalise arbitrary (possibly overlapping, unsorted, empty) spans."""
        s = np.asarray(starts, dtype=_I64).ravel()
        e = np.asarray(ends, dtype=_I64).ravel()
        if s.size == 1 and e.size == 1:  # one span (most allocations): nothing to merge
            return cls(s.copy(), e.copy()) if e[0] > s[0] else cls.empty()
        if s.size <= SMALL:
            return _of_small(s.tolist(), e.tolist())
        keep = e > s
        s, e = s[keep], e[keep]
        if s.size == 0:
            return cls.empty()
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        reach = np.maximum.accumulate(e)
        heads = np.concatenate(([0], np.flatnonzero(s[1:] > reach[:-1]) + 1))
        return cls(s[heads], np.maximum.reduceat(e, heads))

    @classmethod
    def from_runs(cls, runs: IntRuns) -> Spans:
        starts = np.asarray(runs.starts, dtype=_I64)
        return cls.of(starts, starts + np.asarray(runs.lengths, dtype=_I64))

    @classmethod
    def from_column(cls, value: dict[str, list[int]] | None) -> Spans:
        """An ``IntRuns`` column as DuckDB returns it (``{"starts": ..., "lengths": ...}``)."""
        if not value or not value["starts"]:
            return cls.empty()
        starts = np.asarray(value["starts"], dtype=_I64)
        return cls.of(starts, starts + np.asarray(value["lengths"], dtype=_I64))

    @classmethod
    def from_ids(cls, ids: Iterable[int] | np.ndarray) -> Spans:
        arr = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, _I64)
        arr = unique_sorted(arr.ravel())
        return cls.of(arr, arr + 1)

    def __len__(self) -> int:
        return int((self.ends - self.starts).sum())

    def __bool__(self) -> bool:
        return self.starts.size > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Spans):
            return NotImplemented
        if self.starts.size != other.starts.size:
            return False
        if self.starts.size <= SMALL and self.starts.dtype == other.starts.dtype == _I64:
            # the bytes of a few int64s: np.array_equal's checks cost more than the compare
            return (
                self.starts.tobytes() == other.starts.tobytes()
                and self.ends.tobytes() == other.ends.tobytes()
            )
        return np.array_equal(self.starts, other.starts) and np.array_equal(self.ends, other.ends)

    __hash__ = None  # type: ignore[assignment]

    def head(self, limit: int) -> np.ndarray:
        """The smallest ``limit`` members, expanded (for reports)."""
        out: list[np.ndarray] = []
        left = limit
        for s, e in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            if left <= 0:
                break
            take = min(e - s, left)
            out.append(np.arange(s, s + take, dtype=_I64))
            left -= take
        return np.concatenate(out) if out else np.empty(0, _I64)

    def to_array(self) -> np.ndarray:
        return self.head(len(self))

    def covers(self, lo: int, hi: int) -> bool:
        """Whether every integer of ``[lo, hi)`` is a member (an empty range: True). The
        spans neither overlap nor touch, so a covered range lies inside one of them."""
        if hi <= lo:
            return True
        at = int(np.searchsorted(self.starts, lo, side="right")) - 1
        return at >= 0 and int(self.ends[at]) >= hi

    def contains(self, points: np.ndarray) -> np.ndarray:
        """A boolean mask: which of ``points`` are members."""
        idx = np.searchsorted(self.starts, points, side="right") - 1
        ok = idx >= 0
        out = np.zeros(points.shape, dtype=bool)
        out[ok] = points[ok] < self.ends[idx[ok]]
        return out

    def _combine(self, other: Spans, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Spans:
        if self.starts.size + other.starts.size <= SMALL:
            return _combine_small(self, other, keep)
        bounds = unique_sorted(np.concatenate((self.starts, self.ends, other.starts, other.ends)))
        if bounds.size < 2:
            return Spans.empty()
        left, right = bounds[:-1], bounds[1:]
        mask = keep(self.contains(left), other.contains(left))
        return Spans.of(left[mask], right[mask])

    # The shortcuts below give what _combine gives (both sides are canonical), without its
    # numpy passes: set algebra on a few spans is mostly call overhead, and the witness
    # rules do it per committed step and cell, where the sides are usually equal or one
    # of them empty.
    def __or__(self, other: Spans) -> Spans:
        if not other:
            return self
        if not self:
            return other
        if self.starts.size == 1 and other.starts.size == 1:
            # two spans that overlap or touch are one (FT003 grows its clean positions
            # so once per cleared attempt)
            (s0,), (e0,) = self.starts.tolist(), self.ends.tolist()
            (s1,), (e1,) = other.starts.tolist(), other.ends.tolist()
            if s1 <= e0 and s0 <= e1:
                return Spans(np.array([min(s0, s1)], _I64), np.array([max(e0, e1)], _I64))
        return self._combine(other, _either)

    def __and__(self, other: Spans) -> Spans:
        if not self or not other:
            return Spans.empty()
        return self._combine(other, _both)

    def __sub__(self, other: Spans) -> Spans:
        if not self or not other:
            return self
        if self == other:
            return Spans.empty()
        return self._combine(other, _first_only)

    def clip(self, lo: int, hi: int) -> Spans:
        """The members in ``[lo, hi)``."""
        s = np.maximum(self.starts, lo)
        e = np.minimum(self.ends, hi)
        keep = e > s
        return Spans(s[keep], e[keep])

    def modulo(self, ring: int) -> Spans:
        """Counter positions to ring slots: each member ``p`` becomes ``p mod ring``."""
        if self.starts.size <= SMALL:
            return self._modulo_small(ring)
        length = self.ends - self.starts
        if np.any(length >= ring):
            return Spans(np.array([0], _I64), np.array([ring], _I64))
        s = self.starts % ring
        e = s + length
        wraps = e > ring
        starts = np.concatenate((s, np.zeros(int(wraps.sum()), _I64)))
        ends = np.concatenate((np.minimum(e, ring), e[wraps] - ring))
        return Spans.of(starts, ends)

    def _modulo_small(self, ring: int) -> Spans:
        """What :meth:`modulo` gives, for few spans, in Python (its numpy passes cost a
        committed step of FT004 30 us)."""
        starts: list[int] = []
        ends: list[int] = []
        for s, e in zip(self.starts.tolist(), self.ends.tolist(), strict=True):
            if e - s >= ring:
                return Spans(np.array([0], _I64), np.array([ring], _I64))
            first = s % ring
            last = first + e - s
            starts.append(first)
            ends.append(min(last, ring))
            if last > ring:  # wraps past the end of the ring
                starts.append(0)
                ends.append(last - ring)
        return _of_small(starts, ends)

    def describe(self, limit: int = 8) -> str:
        """``[3, 5..9, 12]``-style text, at most ``limit`` spans."""
        parts = [
            str(s) if e - s == 1 else f"{s}..{e - 1}"
            for s, e in zip(self.starts[:limit].tolist(), self.ends[:limit].tolist(), strict=True)
        ]
        if self.starts.size > limit:
            parts.append(f"... ({self.starts.size - limit} more spans)")
        return "[" + ", ".join(parts) + "]"


def _either(a: Any, b: Any) -> Any:
    return a | b


def _both(a: Any, b: Any) -> Any:
    return a & b


def _first_only(a: Any, b: Any) -> Any:
    return a & ~b if isinstance(a, np.ndarray) else a and not b


SMALL = 8
"""Set algebra on at most this many spans in all is done on Python ints: numpy's per-call
cost is most of the work at that size (the witness rules combine a few spans per
committed step and cell)."""


def _of_small(starts: list[int], ends: list[int]) -> Spans:
    """What :meth:`Spans.of` gives, for few spans: sorted and merged in Python (a third of
    the numpy path's cost at two spans; FT004 builds four per committed step)."""
    pairs = sorted((s, e) for s, e in zip(starts, ends, strict=True) if e > s)
    if not pairs:
        return Spans.empty()
    out_s, out_e = [pairs[0][0]], [pairs[0][1]]
    for s, e in pairs[1:]:
        if s > out_e[-1]:
            out_s.append(s)
            out_e.append(e)
        elif e > out_e[-1]:
            out_e[-1] = e
    return Spans(np.array(out_s, dtype=_I64), np.array(out_e, dtype=_I64))


def _combine_small(a: Spans, b: Spans, keep: Callable[[Any, Any], Any]) -> Spans:
    """What :meth:`Spans._combine` gives, for few spans: over the elementary intervals
    between all boundaries, keep those ``keep`` says, merging touching ones. Both sides
    are canonical, so one pointer per side, moving forward, says which span of it (if
    any) holds an interval."""
    a_s, a_e = a.starts.tolist(), a.ends.tolist()
    b_s, b_e = b.starts.tolist(), b.ends.tolist()
    bounds = sorted({*a_s, *a_e, *b_s, *b_e})
    starts: list[int] = []
    ends: list[int] = []
    i = j = 0
    for left, right in itertools.pairwise(bounds):
        while i < len(a_s) and a_e[i] <= left:
            i += 1
        while j < len(b_s) and b_e[j] <= left:
            j += 1
        if not keep(i < len(a_s) and a_s[i] <= left, j < len(b_s) and b_s[j] <= left):
            continue
        if ends and ends[-1] == left:
            ends[-1] = right
        else:
            starts.append(left)
            ends.append(right)
    if not starts:
        return Spans.empty()
    return Spans(np.array(starts, dtype=_I64), np.array(ends, dtype=_I64))


def spans_of_rows(column: pa.StructArray) -> list[Spans]:
    """Each row's set of an ``IntRuns`` column, as :meth:`Spans.from_column` makes it of
    the row's Python value (checked on load: a non-NULL set has as many starts as
    lengths, neither NULL). A row whose runs are canonical already (ascending, neither
    empty nor touching: what the hooks log) is taken as it is, not normalised."""
    if column.null_count:
        return [Spans.from_column(v) for v in column.to_pylist()]
    starts_column = column.field("starts")
    counts = list_lengths(starts_column)
    starts = list_values(starts_column)
    ends = starts + list_values(column.field("lengths"))
    bounds = np.concatenate(([0], np.cumsum(counts)))
    row = np.repeat(np.arange(counts.size), counts)
    bad = np.zeros(counts.size, dtype=bool)
    bad[row[ends <= starts]] = True
    follows = np.flatnonzero(row[1:] == row[:-1])  # run i + 1 comes after run i in a row
    bad[row[follows[starts[follows + 1] <= ends[follows]]]] = True
    return [
        Spans.empty()
        if b == a
        else Spans.of(starts[a:b], ends[a:b])
        if is_bad
        else Spans(starts[a:b], ends[a:b])
        for a, b, is_bad in zip(
            bounds[:-1].tolist(), bounds[1:].tolist(), bad.tolist(), strict=True
        )
    ]


@dataclass(frozen=True)
class Bands:
    """The sets of many rows laid side by side as one set, so that one pass of set algebra
    answers for every row (a few spans a row: numpy's cost per call would be most of the
    work row by row).

    Row ``k``'s members ``m`` in ``[low, low + width - 1)`` become ``k * width + m - low``;
    the last integer of each band is never a member, so no span joins two rows.
    """

    low: int
    width: int

    def fits(self, rows: int) -> bool:
        """Whether ``rows`` bands fit in int64."""
        return (rows + 1) * self.width < 1 << 62

    def lay(self, sets: list[Spans]) -> tuple[Spans, np.ndarray]:
        """``sets`` (row ``k``: ``sets[k]``) as one set, and which rows fit their band (a
        row that does not is left out: it would reach into another row's)."""
        sizes = np.fromiter((s.starts.size for s in sets), _I64, len(sets))
        row = np.repeat(np.arange(len(sets), dtype=_I64), sizes)
        fits = np.ones(len(sets), dtype=bool)
        if not row.size:
            return Spans.empty(), fits
        starts = np.concatenate([s.starts for s in sets])
        ends = np.concatenate([s.ends for s in sets])
        fits[row[(starts < self.low) | (ends > self.low + self.width - 1)]] = False
        keep = fits[row]
        return self.pieces(row[keep], starts[keep], ends[keep]), fits

    def pieces(self, row: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Spans:
        """Spans ``[starts, ends)`` of rows ``row`` (inside their bands) as one set."""
        if not row.size:
            return Spans.empty()
        shift = row * self.width - self.low
        return Spans.of(starts + shift, ends + shift)

    def rows_of(self, spans: Spans) -> np.ndarray:
        """The rows holding a member of ``spans`` (a set laid out by these bands), ascending."""
        return unique_sorted(spans.starts // self.width)


def union_all(spans: Iterable[Spans]) -> Spans:
    items = list(spans)
    if not items:
        return Spans.empty()
    if len(items) == 1:  # canonical already (an attempt's allocation, logged once)
        return items[0]
    return Spans.of(
        np.concatenate([s.starts for s in items]), np.concatenate([s.ends for s in items])
    )


def multiply_covered(starts: np.ndarray, ends: np.ndarray) -> Spans:
    """The integers covered by two or more of the given (possibly overlapping) spans."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size < 2:
        return Spans.empty()
    bounds = unique_sorted(np.concatenate((starts, ends)))
    left = bounds[:-1]
    depth = np.searchsorted(np.sort(starts), left, side="right") - np.searchsorted(
        np.sort(ends), left, side="right"
    )
    mask = depth >= 2
    return Spans.of(left[mask], bounds[1:][mask])


def grouped_spans(
    groups: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:meth:`Spans.of` for every group at once, without a numpy call per group.

    Returns ``(group, start, end)`` of each group's canonical spans, by group, then start
    (two groups hold the same set iff they list the same spans), laid out as
    :class:`Bands`; None where a group is negative or the integers range too widely to
    number every group's apart in int64 (the caller goes group by group then).
    """
    keep = ends > starts
    groups, starts, ends = groups[keep], starts[keep], ends[keep]
    if not groups.size:
        return groups, starts, ends
    low = int(starts.min())
    bands = Bands(low, int(ends.max()) - low + 1)
    if int(groups.min()) < 0 or not bands.fits(int(groups.max()) + 1):
        return None
    merged = bands.pieces(groups, starts, ends)
    group = merged.starts // bands.width
    shift = group * bands.width - low
    return group, merged.starts - shift, merged.ends - shift
