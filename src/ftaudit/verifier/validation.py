"""Validation on read: every loaded row of a built-in event type keeps its model's invariants.

The writer validates each event (pydantic) before it is logged, but a segment's bytes
can say anything: a forged id range of length 10^12 made a rule allocate terabytes,
and start and length lists of different lengths made another crash. Before any rule
runs, one query per event type looks for a row that no writer could have produced and
names its segment, sequence number and field; the run is then unusable (exit 2), not
an internal error. Checked, in SQL over the loaded table (no row becomes a Python
object):

* a field the model requires is not NULL;
* an id set (``IntRuns``) has as many starts as lengths, no NULL in either, starts
  ``>= 0`` and lengths ``> 0``;
* witness ids (allocated, stale, nonzero) lie inside the ring ``[0, B)`` of the
  incarnation's declared buffer size B;
* an allocation's ``witness_ids`` and ``sample_indices`` each hold ``num_ids`` values.
"""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

import duckdb

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.registry import EventRegistry, EventType
from ftaudit.eventlog.sql import ident, literal
from ftaudit.eventlog.views import SEGMENTS

RING_IDS = frozenset(
    {
        ("witness_allocated", "witness_ids"),
        ("witness_allocated", "stale_ids"),
        ("witness_snapshot", "nonzero_ids"),
        ("witness_snapshot", "stale_ids"),
    }
)
"""Id sets whose members are slots of the witness ring: each in ``[0, B)``."""

ALIGNED = {"witness_allocated": ("num_ids", ("witness_ids", "sample_indices"))}
"""Types whose id sets each hold exactly as many values as a count field says."""


def _optional(annotation: Any) -> bool:
    origin = get_origin(annotation)
    return origin in (Union, types.UnionType) and type(None) in get_args(annotation)


def _is_runs(annotation: Any) -> bool:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return annotation is IntRuns or (_optional(annotation) and args == [IntRuns])


def _runs_problems(col: str, ring: bool) -> list[tuple[str, str]]:
    """``(SQL condition, what is wrong)`` for an ``IntRuns`` column that is not NULL."""
    starts, lengths = f"{col}.starts", f"{col}.lengths"
    ends = f"list_transform(list_zip({starts}, {lengths}), lambda r: r[1] + r[2])"
    out = [
        (f"{starts} IS NULL OR {lengths} IS NULL", "starts or lengths is NULL"),
        (f"len({starts}) <> len({lengths})", "starts and lengths differ in length"),
        (
            f"list_count({starts}) <> len({starts}) OR list_count({lengths}) <> len({lengths})",
            "a NULL start or length",
        ),
        (f"coalesce(list_min({lengths}) <= 0, false)", "a run length is not positive"),
        (f"coalesce(list_min({starts}) < 0, false)", "a negative start"),
    ]
    if ring:
        out.append(
            (
                f"_ring IS NOT NULL AND coalesce(list_max({ends}) > _ring, false)",
                "ids beyond the ring of the declared buffer size",
            )
        )
    return out


def _problems(event_type: EventType, present: set[str]) -> list[tuple[str, str]]:
    """``(SQL condition, message)`` of every invariant of one event type's rows."""
    out: list[tuple[str, str]] = []
    for name, annotation in event_type.fields:
        column = event_type.column(name)
        if column not in present:
            continue  # an older segment layout: the model's default applies
        col = ident(column)
        required = event_type.model.model_fields[name].is_required()
        if required and not _optional(annotation):
            out.append((f"{col} IS NULL", f"field {name!r} is NULL, but it is required"))
        if _is_runs(annotation):
            ring = (event_type.name, name) in RING_IDS
            for condition, why in _runs_problems(col, ring):
                out.append((f"{col} IS NOT NULL AND ({condition})", f"field {name!r}: {why}"))
    count_field, sets = ALIGNED.get(event_type.name, (None, ()))
    if count_field is not None and event_type.column(count_field) in present:
        count = ident(event_type.column(count_field))
        for name in sets:
            column = event_type.column(name)
            if column in present:
                total = f"coalesce(list_sum({ident(column)}.lengths), 0)"
                condition = f"{count} IS NOT NULL AND {ident(column)} IS NOT NULL"
                out.append(
                    (
                        f"{condition} AND {total} <> {count}",
                        f"field {name!r} does not hold {count_field} values",
                    )
                )
    return out


def _query(event_type: EventType, problems: list[tuple[str, str]], ring: str) -> str:
    cases = " ".join(f"WHEN {cond} THEN {literal(why)}" for cond, why in problems)
    return f"""
        WITH rings AS (
            SELECT incarnation, max({ring}) AS _ring
            FROM {SEGMENTS} WHERE type = 'run_started' GROUP BY incarnation),
        checked AS (
            SELECT s.filename, s.seq, CASE {cases} END AS why
            FROM {SEGMENTS} s LEFT JOIN rings USING (incarnation)
            WHERE s.type = {literal(event_type.name)})
        SELECT filename, seq, why FROM checked WHERE why IS NOT NULL
        ORDER BY filename, seq LIMIT 1"""


def check_rows(con: duckdb.DuckDBPyConnection, registry: EventRegistry) -> None:
    """Raise :class:`CorruptSegmentError` for the first row that breaks its model."""
    present = {row[0] for row in con.execute(f"DESCRIBE {SEGMENTS}").fetchall()}
    buffer_size = "run_started.buffer_size"
    ring = ident(buffer_size) if buffer_size in present else "CAST(NULL AS BIGINT)"
    for event_type in registry:
        problems = _problems(event_type, present)
        if not problems:
            continue
        found = con.execute(_query(event_type, problems, ring)).fetchone()
        if found is not None:
            filename, seq, why = found
            raise CorruptSegmentError(filename, f"{event_type.name} event at seq {seq}: {why}")


__all__ = ["RING_IDS", "check_rows"]
