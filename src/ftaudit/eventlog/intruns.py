"""Integer sequences stored as runs, so that id sets cost O(runs), not O(B).

Witness ids are slots of a ring that the allocator hands out in contiguous arcs, so
allocated, nonzero and stale id sets are a few runs even when they hold a million ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from ftaudit.eventlog.arrays import unique_sorted


class IntRuns(BaseModel):
    """The sequence ``concat(range(s, s + n) for s, n in zip(starts, lengths))``.

    Order is kept: an allocation's ids and its samples are stored in allocation order,
    so the k-th id belongs to the k-th sample. Sets use the canonical form of
    :meth:`from_ids` (sorted, merged).
    """

    # the validator is built on first validation: the verifier builds IntRuns only through
    # the constructors below, which skip it (see ``_valid``)
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)

    starts: list[int] = []
    lengths: list[int] = []

    @model_validator(mode="after")
    def _check(self) -> IntRuns:
        if len(self.starts) != len(self.lengths):
            raise ValueError("starts and lengths must have the same length")
        if any(n <= 0 for n in self.lengths):
            raise ValueError("run lengths must be positive")
        return self

    @classmethod
    def _valid(cls, starts: list[int], lengths: list[int]) -> IntRuns:
        """Runs already known to hold ``_check``'s invariants, built without validation."""
        return cls.model_construct(starts=starts, lengths=lengths)

    @classmethod
    def from_sequence(cls, values: Iterable[int]) -> IntRuns:
        """Runs of consecutive values, keeping the given order."""
        arr = np.fromiter(values, dtype=np.int64)
        if arr.size == 0:
            return cls._valid([], [])
        breaks = np.flatnonzero(np.diff(arr) != 1) + 1
        starts = np.concatenate(([0], breaks))
        ends = np.concatenate((breaks, [arr.size]))
        return cls._valid(arr[starts].tolist(), (ends - starts).tolist())

    @classmethod
    def from_column(cls, value: Mapping[str, list[int] | None] | None) -> IntRuns:
        """An ``IntRuns`` column as DuckDB returns it (``{"starts": ..., "lengths": ...}``;
        None for a null).

        Not validated again: the verifier checks every id-set column on load, in SQL
        (``ftaudit.verifier.validation``), and Arrow's types guarantee the ints.
        """
        if value is None:
            return cls._valid([], [])
        return cls._valid(list(value["starts"] or []), list(value["lengths"] or []))

    @classmethod
    def from_ids(cls, values: Iterable[int]) -> IntRuns:
        """The canonical set form: sorted, without duplicates, adjacent runs merged."""
        return cls.from_sequence(unique_sorted(np.fromiter(values, dtype=np.int64)))

    @classmethod
    def arc(cls, start: int, count: int, ring: int) -> IntRuns:
        """``count`` consecutive slots of a ring of ``ring`` slots, from ``start``, in order."""
        if count <= 0:
            return cls._valid([], [])
        start %= ring
        first = min(count, ring - start)
        if first == count:
            return cls._valid([start], [count])
        return cls._valid([start, 0], [first, count - first])

    def to_array(self) -> np.ndarray:
        """The values as an int64 array, in stored order."""
        if not self.starts:
            return np.empty(0, dtype=np.int64)
        lengths = np.asarray(self.lengths, dtype=np.int64)
        starts = np.asarray(self.starts, dtype=np.int64)
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        return offsets + np.arange(int(lengths.sum()), dtype=np.int64)

    def to_list(self) -> list[int]:
        return self.to_array().tolist()

    def __len__(self) -> int:
        return sum(self.lengths)
