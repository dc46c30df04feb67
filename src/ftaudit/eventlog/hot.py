"""Field checks for the hot event types, so they can be logged without a model object.

The hooks log these every step, per rank and per witness instance. Building the pydantic
model costs more than logging it, and the flush then reads every value back out of it;
``EventWriter.log_fields`` instead keeps the values as the caller passed them, per type,
and the flush converts them column by column.

Each check accepts exactly the values its model would keep unchanged: the exact types
(strict: ``bool`` is no ``int``), the model's bounds and its alignment rule; it returns
the values to store or None. A map (a metric's values, a step's counters) is stored as
two values, the tuple of its keys and that of its values (:data:`PAIRED`): a copy, so a
caller's later change cannot reach the log, whose key sequence is checked once per
process and shared by every map that repeats it (:func:`key_sequence`), so that the flush
converts it once. Two tuples, not a pair: a tuple of tuples outlives the collector's
young passes as a tracked container, and one per row would set off its full passes.
Anything a check does not accept goes through the model, which raises its own error
naming the field, or converts the values (an ``int`` for a ``float``) as ``log`` would
have stored them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from ftaudit.eventlog.events import (
    Event,
    Metric,
    StepApplied,
    WitnessAllocated,
    WitnessCleared,
    WitnessGradient,
    WitnessSnapshot,
)
from ftaudit.eventlog.intruns import IntRuns

Values = tuple[Any, ...]
"""An event's payload field values in declaration order (the registry's ``fields``)."""

_STR = frozenset({str})
_FLOAT = frozenset({float})
_INT = frozenset({int})


KEY_SEQUENCES: dict[tuple[str, ...], tuple[str, ...]] = {}
"""The key sequences of the maps logged in this process, each checked once (all ``str``)
and shared by every map that repeats it."""
MAX_KEY_SEQUENCES = 4096
"""Beyond this many distinct key sequences (maps whose keys change every step) new ones
are checked each time and not kept: the table stays small, the maps are stored the same."""


def key_sequence(keys: tuple[Any, ...]) -> tuple[str, ...] | None:
    """``keys`` as the one shared tuple of that key sequence when every key is a ``str``,
    else None. A sequence seen before is found, not checked again: a metric logs the same
    names every step."""
    known = KEY_SEQUENCES.get(keys)
    if known is not None:
        return known
    if not set(map(type, keys)) <= _STR:
        return None
    if len(KEY_SEQUENCES) < MAX_KEY_SEQUENCES:
        KEY_SEQUENCES[keys] = keys
    return keys


def _str_map(value: Any, kinds: frozenset[type]) -> tuple[tuple[str, ...], tuple] | None:
    """``value`` as its keys and its values when it is a ``dict`` of ``str`` keys and
    values of ``kinds``."""
    if type(value) is not dict:
        return None
    keys = key_sequence(tuple(value))
    items = tuple(value.values())
    if keys is None or len(items) != len(keys) or not set(map(type, items)) <= kinds:
        return None
    return keys, items


def _snapshot(values: Values) -> Values | None:
    cell, instance, nonzero, stale = values
    # counts written out, not called: a call costs as much as the whole check
    if (
        type(cell) is int
        and cell >= 0
        and type(instance) is str
        and type(nonzero) is type(stale) is IntRuns
    ):
        return values
    return None


def _gradient(values: Values) -> Values | None:
    cell, rank, instance, nonzero = values
    if (
        type(cell) is type(rank) is int
        and cell >= 0
        and rank >= 0
        and type(instance) is str
        and type(nonzero) is IntRuns
    ):
        return values
    return None


def _cleared(values: Values) -> Values | None:
    cell, stale = values
    return values if type(cell) is int and cell >= 0 and type(stale) is IntRuns else None


def _allocated(values: Values) -> Values | None:
    num_ids, counter_after, witness_ids, sample_indices, stale = values
    if not (
        type(num_ids) is type(counter_after) is int
        and num_ids >= 0
        and counter_after >= 0
        and type(witness_ids) is type(sample_indices) is type(stale) is IntRuns
    ):
        return None
    # the model's alignment rule: both id lists hold num_ids values (IntRuns.__len__
    # written out: the method call costs as much as the sum)
    if sum(witness_ids.lengths) != num_ids or sum(sample_indices.lengths) != num_ids:
        return None
    return values


def _metric(values: Values) -> Values | None:
    (scores,) = values
    return _str_map(scores, _FLOAT)


def _applied(values: Values) -> Values | None:
    cell, rank, counters = values
    if not (type(cell) is type(rank) is int and cell >= 0 and rank >= 0):
        return None
    pair = _str_map(counters, _INT)
    if pair is None:
        return None
    keys, items = pair
    return cell, rank, keys, items


CHECKS: Mapping[type[Event], Callable[[Values], Values | None]] = MappingProxyType(
    {
        WitnessSnapshot: _snapshot,
        WitnessGradient: _gradient,
        WitnessCleared: _cleared,
        WitnessAllocated: _allocated,
        Metric: _metric,
        StepApplied: _applied,
    }
)
"""The hot types and their checks; every other type is logged through its model."""


PAIRED: Mapping[type[Event], frozenset[int]] = MappingProxyType(
    {Metric: frozenset({0}), StepApplied: frozenset({2})}
)
"""The payload fields (by position) that a hot type's check stores as two values, the
keys and the values of the ``dict`` (converted by
:func:`ftaudit.eventlog.arrow_schema.pairs_to_arrow`); a row then holds one value more
than the type has fields for each of them."""
