"""Validation on read: every loaded row of a built-in event type keeps its model's invariants.

The writer validates each event (pydantic) before it is logged, but a segment's bytes
can say anything: a forged id range of length 10^12 made a rule allocate terabytes,
and start and length lists of different lengths made another crash. Before any rule
runs, one query per event type looks for a row that no writer could have produced and
names its segment, sequence number and field; the run is then unusable (exit 2), not
an internal error. Checked, in SQL over the loaded tables (no row becomes a Python
object):

* a field the model requires is not NULL;
* an id set (``IntRuns``) has as many starts as lengths, no NULL in either, starts
  ``>= 0`` and lengths ``> 0``;
* witness ids (allocated, stale, nonzero) lie inside the ring ``[0, B)`` of the
  incarnation's declared buffer size B;
* an allocation's ``witness_ids`` and ``sample_indices`` each hold ``num_ids`` values;
* every enum or literal value, also inside lists, maps and nested models (a rank
  outcome in ``step_end.cells``, a checksum's ``when``), and the envelope's writer kind
  and role, is one the models know.

A follower's poll screens the rows of its new segments with Arrow checks of the same
invariants first (:func:`suspect_rows`) and runs the query only on rows they flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import duckdb
import numpy as np

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.arrays import (
    int64_array,
    list_lengths,
    list_values,
    string_array,
    string_scalar,
)
from ftaudit.eventlog.builtin_layouts import WRITER_KINDS, WRITER_ROLES
from ftaudit.eventlog.reader import check_declared_types
from ftaudit.eventlog.registry import EventRegistry, EventType
from ftaudit.eventlog.segment import SegmentMeta
from ftaudit.eventlog.shapes import Shape, is_runs
from ftaudit.eventlog.sql import ident, literal
from ftaudit.eventlog.type_tables import RunTables, table_of

if TYPE_CHECKING:
    import pyarrow as pa

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


def _known(shape: Shape) -> tuple[str, tuple[str, ...]] | None:
    """``(what, known values)`` of an enum or string literal shape, else None."""
    if isinstance(shape, tuple) and shape[0] == "enum":
        return shape[1], shape[2]
    return None


def _unknown_value(expr: str, shape: Shape, depth: int = 0) -> str | None:
    """An SQL condition true where ``expr`` (a value of ``shape``) holds an enum or
    literal value the model does not know, at any depth; None where it holds none."""
    known = _known(shape)
    if known is not None:
        values = ", ".join(literal(v) for v in known[1])
        return f"({expr} IS NOT NULL AND {expr} NOT IN ({values}))"
    if isinstance(shape, str):
        return None
    kind = shape[0]
    if kind in ("list", "map"):
        items = f"map_values({expr})" if kind == "map" else expr
        x = f"x{depth}"
        inner = _unknown_value(x, shape[-1], depth + 1)
        if inner is None:
            return None
        return f"coalesce(list_bool_or(list_transform({items}, lambda {x}: {inner})), false)"
    parts = [
        _unknown_value(f"struct_extract({expr}, {literal(name)})", inner, depth)
        for name, inner in shape[2]
    ]
    found = [f"coalesce({p}, false)" for p in parts if p is not None]
    return " OR ".join(found) or None


def _enum_text(shape: Shape) -> str:
    """The known values of the (first) enum or literal inside ``shape``, for a message."""
    known = _known(shape)
    if known is not None:
        return f"{known[0]} (known: {', '.join(known[1])})"
    if isinstance(shape, str):
        return ""
    if shape[0] in ("list", "map"):
        return _enum_text(shape[-1])
    return next(t for t in (_enum_text(inner) for _, inner in shape[2]) if t)


def _identity_problems(present: set[str]) -> list[tuple[str, str]]:
    """The envelope's writer kind and role must be those of a known process identity."""
    out = []
    for column, values in (("source_kind", WRITER_KINDS), ("source_role", WRITER_ROLES)):
        if column in present:
            allowed = ", ".join(literal(v) for v in values)
            out.append(
                (
                    f"{ident(column)} IS NOT NULL AND {ident(column)} NOT IN ({allowed})",
                    f"envelope field {column!r} is not a known writer {column[7:]} "
                    f"(known: {', '.join(values)})",
                )
            )
    return out


def _problems(event_type: EventType, present: set[str]) -> list[tuple[str, str]]:
    """``(SQL condition, message)`` of every invariant of one event type's rows."""
    out: list[tuple[str, str]] = []
    for name, shape, not_null in event_type.stored:
        column = event_type.column(name)
        if column not in present:
            continue  # an older segment layout: the model's default applies
        col = ident(column)
        if not_null:
            out.append((f"{col} IS NULL", f"field {name!r} is NULL, but it is required"))
        if is_runs(shape):
            ring = (event_type.name, name) in RING_IDS
            for condition, why in _runs_problems(col, ring):
                out.append((f"{col} IS NOT NULL AND ({condition})", f"field {name!r}: {why}"))
        unknown = _unknown_value(col, shape)
        if unknown is not None:
            out.append((unknown, f"field {name!r} holds an unknown {_enum_text(shape)}"))
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
    return out + _identity_problems(present)


def _checked(event_type: EventType, problems: list[tuple[str, str]]) -> str:
    """What is wrong with a row of one event type (NULL: nothing), its first problem first."""
    cases = " ".join(f"WHEN {cond} THEN {literal(why)}" for cond, why in problems)
    return f"WHEN {literal(event_type.name)} THEN CASE {cases} END"


def check_rows(
    con: duckdb.DuckDBPyConnection,
    registry: EventRegistry,
    tables: RunTables,
    incoming: str | None = None,
    footers: Mapping[str, SegmentMeta] | None = None,
) -> None:
    """Raise :class:`CorruptSegmentError` for the first loaded row that breaks its model.

    One query checks every event type's rows (one per type cost each its planning).
    ``incoming``: a table of rows about to join the run's (a follower's new segments, in
    the run's columns, checked before they join: the check then reads only them); the
    ring sizes the rows are checked against are the run's and theirs. With ``footers``
    (by segment path), each segment's rows hold only types its footer lists
    (:func:`~ftaudit.eventlog.reader.check_declared_types`).
    """
    if incoming is None:
        sources = {name: _Rows(table_of(name)) for name in sorted(tables.types)}
    else:
        found = con.execute(f"SELECT DISTINCT type FROM {ident(incoming)}").fetchall()
        names = sorted(name for (name,) in found if name is not None)
        sources = {name: _Rows(incoming, name) for name in names}
    if footers is not None:
        pairs = " UNION ALL ".join(f"SELECT DISTINCT filename, type {r}" for r in sources.values())
        check_footers_list(con.execute(pairs).fetchall() if pairs else [], footers)
    present = set(tables.schema.names)
    parts = []
    for order, event_type in enumerate(registry):
        rows = sources.get(event_type.name)
        problems = _problems(event_type, present) if rows is not None else []
        if problems:
            cases = " ".join(f"WHEN {cond} THEN {literal(why)}" for cond, why in problems)
            parts.append(
                f"SELECT {order} AS _order, type, filename, seq, CASE {cases} END AS why "
                f"{rows.joined('rings USING (incarnation)')}"
            )
    if not parts:
        return
    ring = ident(_BUFFER) if _BUFFER in present else "CAST(NULL AS BIGINT)"
    started = [] if incoming is None else [_Rows(incoming, "run_started")]
    if "run_started" in tables.types:
        started.append(_Rows(table_of("run_started")))
    starts = " UNION ALL ".join(f"SELECT incarnation, {ring} AS size {r}" for r in started)
    rings = (
        f"SELECT incarnation, max(size) AS _ring FROM ({starts}) GROUP BY incarnation"
        if starts
        else "SELECT CAST(NULL AS BIGINT) AS incarnation, CAST(NULL AS BIGINT) AS _ring"
    )
    # one statement, each type's rows judged by its own conditions (a statement per type
    # cost each its planning)
    found = con.execute(
        f"""WITH rings AS ({rings}), checked AS ({" UNION ALL ".join(parts)})
            SELECT type, filename, seq, why FROM checked WHERE why IS NOT NULL
            ORDER BY _order, filename, seq LIMIT 1"""
    ).fetchall()  # read out: a result left open blocks the connection's next call
    if found:
        ((name, filename, seq, why),) = found
        raise CorruptSegmentError(filename, f"{name} event at seq {seq}: {why}")


_BUFFER = "run_started.buffer_size"


@dataclass(frozen=True)
class _Rows:
    """Where one event type's rows are: its own table, or those of ``event_type`` in a
    table of rows of any type."""

    table: str
    event_type: str | None = None

    def joined(self, other: str) -> str:
        """``FROM`` these rows ``LEFT JOIN other`` (``other``: a table and its condition)."""
        where = self._where()
        return f"FROM {ident(self.table)} LEFT JOIN {other}{where}"

    def _where(self) -> str:
        if self.event_type is None:
            return ""
        return f" WHERE type = {literal(self.event_type)}"

    def __str__(self) -> str:
        return f"FROM {ident(self.table)}{self._where()}"


def check_footers_list(held: Iterable[tuple[str, str]], footers: Mapping[str, SegmentMeta]) -> None:
    """Each ``(segment, type)`` pair of rows ``held`` is a type the segment's footer lists."""
    by_segment: dict[str, set[str]] = {}
    for filename, name in held:
        by_segment.setdefault(filename, set()).add(name)
    for filename in sorted(by_segment):
        check_declared_types(filename, by_segment[filename], footers[filename])


def suspect_rows(table: pa.Table, registry: EventRegistry, rings: Mapping[int, int]) -> bool:
    """Whether a row of ``table`` (rows in the loaded table's columns) may break its model:
    False only where :func:`check_rows` over them finds nothing.

    A follower's poll checks the few thousand rows of the segments new to its window.
    Planning :func:`check_rows`'s statement (17 KB of SQL: every condition of every type)
    cost each poll 25-32 ms of CPU; these Arrow checks of the same invariants cost a
    fraction. They are a screen, not the judge: where a problem may be (they look at
    columns, not at each row of its type: coarser than the SQL), the caller runs
    :func:`check_rows`, whose first problem and its message are the only ones reported.
    ``rings``: each incarnation's ring size (the largest buffer size its ``run_started``
    rows declare, these and the run's), as :func:`check_rows` joins them.
    """
    import pyarrow.compute as pc  # a follower's poll only: ft-verify's plain path never loads it

    present = set(table.column_names)
    if any(
        not table.schema.field(f.name).type.equals(f.type)
        for event_type in registry
        for f in event_type.arrow_fields
        if f.name in present
    ):
        return True  # a column its model would not store (typed by a footer that omits its
        # type): the checks below read its children by name, the judge refuses it
    types = set(pc.unique(table["type"]).to_pylist())
    ring_of_row = _ring_of_row(table, rings) if rings else None
    for event_type in registry:
        if event_type.name not in types:
            continue
        of_type = pc.equal(table["type"], string_scalar(event_type.name))
        for field in _screened(event_type):
            if field.column not in present:
                continue
            values = table[field.column].combine_chunks()
            if field.required and values.null_count and values.filter(of_type).null_count:
                return True
            if field.runs:
                if _runs_suspect(values, ring_of_row if field.ring else None):
                    return True
            if field.enum and _unknown_in(values, field.shape):
                return True
        if _misaligned(table, event_type, present):
            return True
    return _foreign_identity(table, present)


@dataclass(frozen=True)
class _Screened:
    """What :func:`suspect_rows` checks of one field (what :func:`_problems` writes as SQL)."""

    column: str
    shape: Shape
    required: bool
    runs: bool
    ring: bool
    enum: bool


_SCREENS: dict[tuple[str, tuple], tuple[_Screened, ...]] = {}


def _screened(event_type: EventType) -> tuple[_Screened, ...]:
    """The fields of ``event_type`` and what is checked of each (worked out once per type)."""
    key = (event_type.name, event_type.stored)
    found = _SCREENS.get(key)
    if found is None:
        found = _SCREENS[key] = tuple(
            _Screened(
                event_type.column(name),
                shape,
                not_null,
                is_runs(shape),
                (event_type.name, name) in RING_IDS,
                _unknown_value("x", shape) is not None,
            )
            for name, shape, not_null in event_type.stored
        )
    return found


def _ring_of_row(table: pa.Table, rings: Mapping[int, int]) -> pa.Array:
    """Each row's ring size (NULL: its incarnation declared none)."""
    import pyarrow.compute as pc

    keys = int64_array(np.fromiter(rings, np.int64, len(rings)))
    sizes = int64_array(np.fromiter(rings.values(), np.int64, len(rings)))
    return sizes.take(pc.index_in(table["incarnation"].combine_chunks(), value_set=keys))


def _runs_suspect(values: pa.StructArray, ring: pa.Array | None) -> bool:
    """Whether a not-NULL id set of ``values`` may break one of :func:`_runs_problems`."""
    import pyarrow.compute as pc

    if values.null_count == len(values):
        return False
    starts, lengths = (values.flatten()[values.type.get_field_index(f)] for f in _RUNS)
    if starts.null_count != values.null_count or lengths.null_count != values.null_count:
        return True  # starts or lengths NULL in a set that is not
    if not np.array_equal(list_lengths(starts), list_lengths(lengths)):
        return True
    first, size = pc.list_flatten(starts), pc.list_flatten(lengths)
    if first.null_count or size.null_count:
        return True
    if not len(first):
        return False
    if pc.min(size).as_py() <= 0 or pc.min(first).as_py() < 0 or pc.max(size).as_py() >= _HUGE:
        return True  # (a huge run: its sums may overflow where the SQL's do not)
    try:
        ends = pc.add_checked(first, size)
    except ArithmeticError:  # pyarrow's overflow: the SQL's sum may fail as well
        return True
    if ring is None:
        return False
    beyond = pc.greater(ends, ring.take(pc.list_parent_indices(starts)))
    return bool(pc.any(beyond).as_py())


_RUNS = ("starts", "lengths")

_HUGE = 1 << 40
"""A run this long is no writer's (10^12 ids): screened out, judged by the SQL."""

_SUMMABLE = (1 << 63) // _HUGE
"""Fewer runs than this, each shorter than :data:`_HUGE`, sum below ``2^63`` (no int64
wrap that could make a set's forged total equal its count)."""


def _misaligned(table: pa.Table, event_type: EventType, present: set[str]) -> bool:
    """Whether an id set of an :data:`ALIGNED` type may hold other than its count of values
    (its lengths are screened already: none NULL, each below :data:`_HUGE`)."""
    import pyarrow.compute as pc

    count_field, sets = ALIGNED.get(event_type.name, (None, ()))
    if count_field is None or event_type.column(count_field) not in present:
        return False
    count = table[event_type.column(count_field)].combine_chunks()
    for name in sets:
        column = event_type.column(name)
        if column not in present:
            continue
        values = table[column].combine_chunks()
        lengths = values.flatten()[values.type.get_field_index("lengths")]
        per_row = list_lengths(lengths)  # a NULL list: 0 lengths, its set NULL, not judged
        runs = list_values(lengths)
        if len(runs) >= _SUMMABLE:
            return True  # its sums may wrap in int64, where the SQL's (HUGEINT) do not
        sums = np.concatenate(([0], np.cumsum(runs)))
        ends = np.cumsum(per_row)
        total = int64_array(sums[ends] - sums[ends - per_row])
        differ = pc.and_(pc.not_equal(total, count), values.is_valid())
        if pc.any(differ).as_py():
            return True
    return False


def _unknown_in(values: pa.Array, shape: Shape) -> bool:
    """Whether ``values`` (of ``shape``) hold an enum or literal value the model does
    not know, at any depth (a NULL parent's children too: coarser than the SQL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    known = _known(shape)
    if known is not None:
        return _outside(values, known[1])
    if isinstance(shape, str):
        return False
    if shape[0] == "map":  # every entry's value, those of sliced-off rows too
        return _unknown_in(values.items, shape[-1])
    if shape[0] == "list":
        return _unknown_in(pc.list_flatten(values), shape[1])
    assert isinstance(values, pa.StructArray)
    children = values.flatten()
    return any(
        _unknown_in(children[values.type.get_field_index(name)], inner)
        for name, inner in shape[2]
        if _enum_inside(inner)
    )


def _enum_inside(shape: Shape) -> bool:
    return _unknown_value("x", shape) is not None


def _outside(values: pa.Array | pa.ChunkedArray, known: tuple[str, ...]) -> bool:
    """Whether a value of ``values`` that is not NULL is none of ``known``."""
    import pyarrow.compute as pc

    found = values.drop_null()
    return bool(len(found)) and not pc.all(pc.is_in(found, value_set=string_array(known))).as_py()


def _foreign_identity(table: pa.Table, present: set[str]) -> bool:
    """Whether an envelope's writer kind or role may be none of :func:`_identity_problems`'s."""
    return any(
        _outside(table[column], known)
        for column, known in (("source_kind", WRITER_KINDS), ("source_role", WRITER_ROLES))
        if column in present
    )


__all__ = ["RING_IDS", "check_footers_list", "check_rows", "suspect_rows"]
