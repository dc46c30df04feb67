"""Integer sequences stored as runs, so that id sets cost O(runs), not O(B).

Witness ids are slots of a ring that the allocator hands out in contiguous arcs, so
allocated, nonzero and stale id sets are a few runs even when they hold a million ids.

:class:`IntRuns` is a plain class, not a pydantic model: the verifier builds many and
reads them (its start-up imports no pydantic); the event models validate and serialize
it as a nested ``{"starts": [...], "lengths": [...]}`` (``__get_pydantic_core_schema__``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ftaudit.eventlog.arrays import concat_ranges, unique_sorted


def _ints(name: str, values: Any) -> list[int]:
    """``values`` when it is a list of ints (bools are not), as pydantic's strict mode wants."""
    if type(values) is not list or not all(type(v) is int for v in values):
        raise ValueError(f"IntRuns.{name} must be a list of int, got {values!r}")
    return values


class IntRuns:
    """The sequence ``concat(range(s, s + n) for s, n in zip(starts, lengths))``.

    Order is kept: an allocation's ids and its samples are stored in allocation order,
    so the k-th id belongs to the k-th sample. Sets use the canonical form of
    :meth:`from_ids` (sorted, merged). Frozen; equal when both lists are.
    """

    # its values live in its __dict__ (not slots): the writer's Arrow conversion reads
    # them with vars(), 3x faster than attributes (``arrow_schema._composite``)
    starts: list[int]
    lengths: list[int]

    def __init__(self, *, starts: list[int] | None = None, lengths: list[int] | None = None):
        starts = [] if starts is None else _ints("starts", starts)
        lengths = [] if lengths is None else _ints("lengths", lengths)
        if len(starts) != len(lengths):
            raise ValueError("starts and lengths must have the same length")
        if any(n <= 0 for n in lengths):
            raise ValueError("run lengths must be positive")
        self.__dict__.update(starts=starts, lengths=lengths)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"IntRuns is frozen: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"IntRuns is frozen: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not IntRuns:
            return NotImplemented
        return self.starts == other.starts and self.lengths == other.lengths

    __hash__ = None  # type: ignore[assignment]  # its lists are not hashable

    def __repr__(self) -> str:
        return f"IntRuns(starts={self.starts!r}, lengths={self.lengths!r})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """As a field of an event model: an ``IntRuns`` (strict), or in lax mode and from
        JSON its two lists; serialized as them."""
        from pydantic_core import core_schema as cs

        ints = cs.list_schema(cs.int_schema(strict=True), strict=True)
        fields = cs.typed_dict_schema(
            {
                "starts": cs.typed_dict_field(ints, required=False),
                "lengths": cs.typed_dict_field(ints, required=False),
            },
            extra_behavior="forbid",
        )
        from_fields = cs.no_info_after_validator_function(lambda d: cls(**d), fields)
        instance = cs.is_instance_schema(cls)
        return cs.json_or_python_schema(
            json_schema=from_fields,
            python_schema=cs.lax_or_strict_schema(
                lax_schema=cs.union_schema([instance, from_fields]), strict_schema=instance
            ),
            serialization=cs.plain_serializer_function_ser_schema(
                lambda runs: {"starts": runs.starts, "lengths": runs.lengths}
            ),
        )

    @classmethod
    def _valid(cls, starts: list[int], lengths: list[int]) -> IntRuns:
        """Runs already known to hold the constructor's invariants, built without its checks."""
        runs = object.__new__(cls)
        runs.__dict__.update(starts=starts, lengths=lengths)
        return runs

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
        return concat_ranges(self.starts, self.lengths)

    def to_list(self) -> list[int]:
        return self.to_array().tolist()

    def __len__(self) -> int:
        return sum(self.lengths)
