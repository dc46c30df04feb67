"""Field checks for the hot event types, so they can be logged without a model object.

The hooks log these every step, per rank and per witness instance. Building the pydantic
model costs more than logging it, and the flush then reads every value back out of it;
``EventWriter.log_fields`` instead keeps the values as the caller passed them, per type,
and the flush converts them column by column.

Each check accepts exactly the values its model would keep unchanged: the exact types
(strict: ``bool`` is no ``int``), the model's bounds and its alignment rule; it returns
the values to store (dicts copied, so a caller's later change cannot reach the log) or
None. Anything it does not accept goes through the model, which raises its own error
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


def _str_map(value: Any, kinds: frozenset[type]) -> dict | None:
    """A copy of ``value`` when it is a ``dict`` of ``str`` keys and values of ``kinds``."""
    if type(value) is not dict:
        return None
    copy = dict(value)
    if set(map(type, copy)) <= _STR and set(map(type, copy.values())) <= kinds:
        return copy
    return None


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
    copy = _str_map(scores, _FLOAT)
    return None if copy is None else (copy,)


def _applied(values: Values) -> Values | None:
    cell, rank, counters = values
    if not (type(cell) is type(rank) is int and cell >= 0 and rank >= 0):
        return None
    copy = _str_map(counters, _INT)
    return None if copy is None else (cell, rank, copy)


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
