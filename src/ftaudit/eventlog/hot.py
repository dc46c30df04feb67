"""The hot event types, logged without a model object (``EventWriter.log_fields``).

The hooks log these every step, per rank and per witness instance. Building the pydantic
model costs more than logging it, and the flush then reads every value back out of it;
``log_fields`` instead checks the values as the model would and buffers them as they are,
per type, and the flush converts them column by column.

Checking and buffering a row is one call into C (``hotpath.add``): on the training
thread, under the GIL, it was most of what a durable event cost in Python. It accepts
exactly the values its model would keep unchanged, for each kind:

- ``WitnessSnapshot``: ``cell`` an ``int`` >= 0, ``instance`` a ``str``, both id sets
  ``IntRuns``;
- ``WitnessGradient``: ``cell`` and ``rank`` ``int`` >= 0, ``instance`` a ``str``, the
  ids ``IntRuns``;
- ``WitnessCleared``: ``cell`` an ``int`` >= 0, the ids ``IntRuns``;
- ``WitnessAllocated``: ``num_ids`` and ``counter_after`` ``int`` >= 0, three
  ``IntRuns``, the witness ids and the sample indices each ``num_ids`` long (the
  model's alignment rule);
- ``Metric``: a ``dict`` of ``str`` to ``float``;
- ``StepApplied``: ``cell`` and ``rank`` ``int`` >= 0, a ``dict`` of ``str`` to ``int``.

Types are exact (strict, as the models are: ``bool`` is no ``int``, a ``dict`` subclass
no ``dict``). Anything else is declined and goes through the model, which raises its own
error naming the field, or converts the values (an ``int`` for a ``float``) as ``log``
would have stored them. ``tests/eventlog/test_hotpath.py`` holds the C checks to these
rules, written there in Python.

A map is stored as two values, the tuple of its keys and that of its values
(:data:`PAIRED`): a copy, so a caller's later change cannot reach the log, whose key
sequence is checked once per process and shared by every map that repeats it
(:data:`KEY_SEQUENCES`), so that the flush converts it once. Two tuples, not a pair: a
tuple of tuples outlives the collector's young passes as a tracked container, and one
per row would set off its full passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ftaudit.eventlog import hotpath
from ftaudit.eventlog.events import (
    Event,
    Metric,
    StepApplied,
    WitnessAllocated,
    WitnessCleared,
    WitnessGradient,
    WitnessSnapshot,
)

KINDS: Mapping[type[Event], int] = MappingProxyType(
    {
        WitnessSnapshot: 0,
        WitnessGradient: 1,
        WitnessCleared: 2,
        WitnessAllocated: 3,
        Metric: 4,
        StepApplied: 5,
    }
)
"""The hot types and the number ``hotpath.add`` knows each by; every other type is
logged through its model."""

PAIRED: Mapping[type[Event], frozenset[int]] = MappingProxyType(
    {Metric: frozenset({0}), StepApplied: frozenset({2})}
)
"""The payload fields (by position) that a hot type's row stores as two values, the keys
and the values of the ``dict`` (converted by
:func:`ftaudit.eventlog.arrow_schema.pairs_to_arrow`); a row then holds one value more
than the type has fields for each of them."""

KEY_SEQUENCES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""The key sequences of the maps logged in this process, each checked once (all ``str``)
and shared by every map that repeats it."""
MAX_KEY_SEQUENCES = 4096
"""Beyond this many distinct key sequences (maps whose keys change every step) new ones
are checked each time and not kept: the table stays small, the maps are stored the same."""


def use_key_sequences(table: dict[tuple[str, ...], tuple[str, ...]], bound: int) -> None:
    """Keep the shared key sequences in ``table``, up to ``bound`` of them."""
    hotpath.configure(table, bound)


use_key_sequences(KEY_SEQUENCES, MAX_KEY_SEQUENCES)

add = hotpath.add
"""``add(kind, values, out, seq, ts_ns, context) -> bool``: append one row to ``out`` (its
payload values as stored, then ``seq``, ``ts_ns`` and ``context``); False, with ``out``
unchanged, when the values are declined."""
