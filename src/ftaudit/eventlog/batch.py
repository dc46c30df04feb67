"""A writer's buffered events, as the flush will read them.

Two kinds of rows share one sequence: events logged as objects (``EventWriter.log``) and
the hot events logged as field values (``EventWriter.log_fields``), kept per type as the
values the caller passed. Either way logging only appends references: every conversion
waits for the flush (``segment_table.build_table``).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ftaudit.eventlog.context import StepAttempt
from ftaudit.eventlog.events import Event

ENVELOPE = 3
"""What a buffered row holds after its payload values: its sequence number, its time
(``time_ns``) and the step context it takes."""


@dataclass
class Rows:
    """One event type's rows logged as field values, in logging order.

    ``values`` holds every row one after another: its ``width`` payload values in
    declaration order (as :mod:`ftaudit.eventlog.hot` stores them), then its sequence
    number, time and :class:`StepAttempt` (the caller's own, else its step context's).
    Flat, not a tuple per row: a buffered row then holds no container of its own, so
    buffering leaves the garbage collector nothing new to track (a tuple per row, alive
    until the flush, was promoted to the oldest generation and set off its full passes
    over the whole heap, on the training thread); and one list takes a row in one call.
    """

    width: int
    values: list[Any] = field(default_factory=list)

    @property
    def stride(self) -> int:
        return self.width + ENVELOPE

    def __len__(self) -> int:
        return len(self.values) // self.stride

    def column(self, k: int) -> list[Any]:
        """Payload field ``k`` of every row."""
        return self.values[k :: self.stride]

    @property
    def seqs(self) -> list[int]:
        return self.values[self.width :: self.stride]

    @property
    def ts_ns(self) -> list[int]:
        return self.values[self.width + 1 :: self.stride]

    @property
    def contexts(self) -> list[StepAttempt]:
        return self.values[self.width + 2 :: self.stride]

    def oldest_ns(self) -> int | None:
        return self.values[self.width + 1] if self.values else None

    def extend(self, other: Rows) -> None:
        self.values += other.values

    def drop_before(self, seq: int) -> int:
        """Forget the rows below sequence number ``seq``; return how many."""
        count = bisect_left(self.seqs, seq)
        del self.values[: count * self.stride]
        return count


@dataclass
class Batch:
    """A writer's buffered events.

    ``events``, ``ts_ns`` and ``contexts`` are the events logged as objects: the event
    itself, its time and the step context it was logged in (the event's own step and
    attempt win over the context's). ``rows`` holds the events logged as field values,
    per type. The sequence numbers of a batch are contiguous; those ``rows`` do not take
    belong to ``events``, in order (see :meth:`object_seqs`).
    """

    events: list[Event] = field(default_factory=list)
    ts_ns: array = field(default_factory=lambda: array("q"))
    contexts: list[StepAttempt] = field(default_factory=list)
    rows: dict[type[Event], Rows] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.events) + sum(map(len, self.rows.values()))

    def oldest_ns(self) -> int | None:
        """When the oldest buffered event was logged; None when the batch is empty."""
        stamps = [rows.oldest_ns() for rows in self.rows.values() if rows.values]
        if self.ts_ns:
            stamps.append(self.ts_ns[0])
        return min(stamps, default=None)

    def object_seqs(self, first: int) -> np.ndarray:
        """The sequence numbers of ``events``, for a batch starting at ``first``."""
        n = len(self)
        taken = np.ones(n, dtype=np.bool_)
        for rows in self.rows.values():
            taken[np.array(rows.seqs, dtype=np.int64) - first] = False
        return np.flatnonzero(taken) + first

    def extend(self, other: Batch) -> None:
        """Append ``other``, whose sequence numbers all follow this batch's."""
        self.events += other.events
        self.ts_ns += other.ts_ns
        self.contexts += other.contexts
        for model, rows in other.rows.items():
            self.rows.setdefault(model, Rows(rows.width)).extend(rows)

    def drop_first(self, count: int, first: int) -> None:
        """Forget the ``count`` oldest events of a batch starting at ``first``."""
        cut = first + count
        typed = sum(rows.drop_before(cut) for rows in self.rows.values())
        objects = count - typed
        del self.events[:objects], self.ts_ns[:objects], self.contexts[:objects]
        self.rows = {model: rows for model, rows in self.rows.items() if rows}
