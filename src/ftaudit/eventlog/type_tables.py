"""The loaded run's rows in DuckDB: one table per event type.

A segment holds events of several types, each with its own payload columns
(``<type>.<field>``). In one table of every column of the run each row would carry the
other types' columns as NULLs: DuckDB's in-memory tables keep a NULL as wide as a value,
so the run's 1.27 M rows of the largest benchmark took 1.61 GB in a table of 74 columns
and 0.96 GB in one table per type. Each type's table holds the envelope, that type's
columns as the segments typed them, and ``filename``; the views of
:mod:`ftaudit.eventlog.views` read them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.sql import ident, literal

FILENAME = "filename"
"""The column naming each row's segment (as DuckDB's ``filename = true`` did)."""

_PREFIX = "_rows_"


@dataclass(frozen=True)
class RunTables:
    """What a connection holds of a run: its columns and the types with a table."""

    schema: pa.Schema
    """Every column of the run's segments, and :data:`FILENAME`: segments added later
    (a follower's) may hold no other, each typed as here."""
    types: frozenset[str]
    """The event types with a table (:func:`table_of`)."""


def table_of(event_type: str) -> str:
    """The name of the table holding ``event_type``'s rows."""
    return f"{_PREFIX}{event_type}"


def stored(event_type: str) -> str:
    """The qualified name of ``event_type``'s DuckDB table: a moving window's rows are
    registered under the table's own name (:mod:`~ftaudit.eventlog.window_tables`), and
    a registered name comes first in DuckDB's search path (the temporary catalog's
    ``main`` schema, so ``main.<table>`` finds it too)."""
    return f"memory.main.{ident(table_of(event_type))}"


_SHARED = frozenset({*ENVELOPE_COLUMNS, FILENAME})


def _in_table(column: str, event_type: str) -> bool:
    """Whether ``column`` is one of ``event_type``'s table: the envelope, the type's own
    payload columns (``<type>.<field>``) and :data:`FILENAME`."""
    return column in _SHARED or column.startswith(f"{event_type}.")


def type_fields(schema: pa.Schema, event_type: str) -> list[pa.Field]:
    """The columns of ``event_type``'s table in a run of columns ``schema``, in its order."""
    return [f for f in schema if _in_table(f.name, event_type)]


def duckdb_types(con: duckdb.DuckDBPyConnection, arrow: list[pa.DataType]) -> list[str]:
    """The DuckDB names of ``arrow`` types, asked of DuckDB once (not once per type: that
    cost ``ft-verify`` ~30 ms on a small run, where most fields of most types are absent)."""
    if not arrow:
        return []
    # not pa.array([]): see eventlog.arrays
    empty = pa.table({f"c{i}": pa.nulls(0, t) for i, t in enumerate(arrow)})
    return [str(t) for t in con.from_arrow(empty).types]


def create_tables(
    con: duckdb.DuckDBPyConnection, schema: pa.Schema, event_types: Iterable[str]
) -> None:
    """Create the (empty) table of each of ``event_types`` for a run of columns ``schema``,
    in one statement: a statement each costs its planning, and a small run has a dozen."""
    tables = {name: type_fields(schema, name) for name in event_types}
    if not tables:
        return
    fields = {f.name: f.type for columns in tables.values() for f in columns}
    duck = dict(zip(fields, duckdb_types(con, list(fields.values())), strict=True))
    con.execute(
        "; ".join(
            f"CREATE TABLE {ident(table_of(name))} "
            f"({', '.join(f'{ident(f.name)} {duck[f.name]}' for f in columns)})"
            for name, columns in tables.items()
        )
    )


def add_columns(
    con: duckdb.DuckDBPyConnection, event_types: Collection[str], fields: Iterable[pa.Field]
) -> None:
    """Add each of ``fields`` (NULL in the rows held) to the table of the type it belongs
    to, where that type is one of ``event_types`` (those with a table)."""
    owned = [(f, f.name.split(".", 1)[0]) for f in fields if "." in f.name]
    owned = [(f, name) for f, name in owned if name in event_types]
    types = duckdb_types(con, [f.type for f, _ in owned])
    for (field, name), duck in zip(owned, types, strict=True):
        con.execute(f"ALTER TABLE {stored(name)} ADD COLUMN {ident(field.name)} {duck}")


_DROPS = "_drops"
"""The name :func:`delete_below` gives its table of rows to delete while it runs."""


def delete_below(con: duckdb.DuckDBPyConnection, drops: pa.Table) -> None:
    """Delete the rows ``drops`` names: it holds ``type``, ``filename`` and ``below``, and
    of each segment (``filename``) and event type in it, the rows whose ``seq`` is below
    ``below`` go (NULL: every row). One statement per type whatever the segments: a
    condition listing them cost a follower's poll 1-2 ms a statement in parsing it and
    comparing each row's path with every one listed, and two statements a type."""
    con.register(_DROPS, drops)
    try:
        for name in sorted(set(drops["type"].to_pylist())):
            table = ident(table_of(name))
            con.execute(
                f"DELETE FROM {table} USING {_DROPS} d "
                f"WHERE d.type = {literal(name)} AND {table}.{FILENAME} = d.{FILENAME} "
                f"AND (d.below IS NULL OR {table}.seq < d.below)"
            ).fetchall()
    finally:
        con.unregister(_DROPS)


__all__ = [
    "FILENAME",
    "RunTables",
    "add_columns",
    "create_tables",
    "delete_below",
    "duckdb_types",
    "stored",
    "table_of",
    "type_fields",
]
