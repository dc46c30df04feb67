"""A moving window's rows as Arrow tables, one per event type, that DuckDB reads in place.

A follower's window moves at every poll: the rows of a few dozen new segments join it
and the oldest leave. Held in DuckDB's tables (:mod:`~ftaudit.eventlog.type_tables`),
each move cost an ``INSERT`` and a ``DELETE`` per event type, 1.2-1.5 ms each however
few the rows (planning a statement over a table of 17 columns): 30-45 ms of a poll of
about 150. Held as Arrow, a move filters and appends a few thousand rows and registers
each changed table again (0.4 ms). A name registered on a connection comes before a
table of the same name in DuckDB's search path, so the views read these tables without
a change; the DuckDB tables stay, empty, to keep their columns (``widen`` adds to them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ftaudit.eventlog.arrays import conform, int64_scalar, string_array, string_scalar
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import FILENAME, RunTables, table_of, type_fields

_CHUNKS = 8
"""A table held in more chunks than this is made one again: each move appends one, and
DuckDB scans a table chunk by chunk."""


@dataclass
class WindowTables:
    """The rows of each event type of a connection's run, held as registered Arrow."""

    con: duckdb.DuckDBPyConnection
    held: dict[str, pa.Table]
    """Event type -> its rows, in the columns of its table."""

    @classmethod
    def adopt(cls, con: duckdb.DuckDBPyConnection, tables: RunTables) -> WindowTables:
        """Take the rows of ``tables``' DuckDB tables on ``con`` into Arrow (the tables
        are emptied) and register them in their place."""
        window = cls(con, {})
        for name in sorted(tables.types):
            schema = pa.schema(type_fields(tables.schema, name))
            table = f"main.{ident(table_of(name))}"
            columns = ", ".join(ident(f.name) for f in schema)
            rows = con.sql(f"SELECT {columns} FROM {table}").to_arrow_table()
            # DuckDB's Arrow names a list's child otherwise than the segments' readers:
            # the same columns, typed as every row appended later will be
            window.held[name] = rows.cast(schema).combine_chunks()
            # read to the end: DuckDB holds the connection while a result is unread
            con.execute(f"DELETE FROM {table}").fetchall()
            window._register(name)
        return window

    def widen(self, tables: RunTables) -> None:
        """Give each held table the columns ``tables`` now gives its type (NULL in the rows
        held), and hold an empty table for each type new to ``tables``."""
        for name in sorted(tables.types):
            schema = pa.schema(type_fields(tables.schema, name))
            held = self.held.get(name)
            if held is not None and held.schema.equals(schema):
                continue
            self.held[name] = conform(held, schema) if held is not None else schema.empty_table()
            self._register(name)

    def append(self, rows: pa.Table, masks: Mapping[str, pa.ChunkedArray]) -> int:
        """Append the rows of ``rows`` (in the run's columns) that each mask of ``masks``
        selects to the table of its event type; returns how many rows were appended."""
        appended = 0
        for name, mask in masks.items():
            held = self.held[name]
            # the table's columns, then the rows: filtering every column of the run costs
            # most of a millisecond a type
            new = rows.select(held.column_names).filter(mask)
            if not new.num_rows:
                continue
            appended += new.num_rows
            self._keep(name, pa.concat_tables([held, new]))
        return appended

    def delete_below(self, drops: pa.Table) -> None:
        """Delete the rows ``drops`` names, as
        :func:`~ftaudit.eventlog.type_tables.delete_below` does in DuckDB's tables."""
        import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

        cuts: dict[str, list[tuple[str, int | None]]] = {}
        listed = (drops[c].to_pylist() for c in ("type", FILENAME, "below"))
        for name, path, below in zip(*listed, strict=True):
            cuts.setdefault(name, []).append((path, below))
        for name, segments in sorted(cuts.items()):
            held = self.held[name]
            paths = held[FILENAME]
            whole = [path for path, below in segments if below is None]
            gone = pc.is_in(paths, value_set=string_array(whole))
            for path, below in segments:
                if below is not None:
                    early = pc.less(held["seq"], int64_scalar(below))
                    gone = pc.or_(gone, pc.and_(pc.equal(paths, string_scalar(path)), early))
            self._keep(name, held.filter(pc.invert(gone)))

    def _keep(self, name: str, rows: pa.Table) -> None:
        if rows.column(0).num_chunks > _CHUNKS:
            rows = rows.combine_chunks()
        self.held[name] = rows
        self._register(name)

    def _register(self, name: str) -> None:
        self.con.register(table_of(name), self.held[name])


__all__ = ["WindowTables"]
