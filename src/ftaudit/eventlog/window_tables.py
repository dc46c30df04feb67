"""A moving window's rows as Arrow tables, one per event type, that DuckDB reads in place.

A follower's window moves at every poll: the rows of a few dozen new segments join it
and the oldest segments leave. Held in DuckDB's tables
(:mod:`~ftaudit.eventlog.type_tables`), each move cost an ``INSERT`` and a ``DELETE``
per event type, 1.2-3 ms each however few the rows (planning a statement over a table of
17 columns): about 40 ms of a poll of 160. Held as Arrow, a move appends the new rows as
a piece of their own, drops the pieces whose segments all left and filters only a piece
that some of them left (filtering a type's whole window cost a millisecond a type). Each
type is registered once, as an object DuckDB asks for the rows at every scan
(:class:`_Held`); a move swaps its rows in (registering each changed table again cost a
poll 0.2-0.5 ms a type, 4% of it). A name registered on a connection comes
before a table of the same name in DuckDB's search path, so every view reads these
tables as it read DuckDB's; those stay, empty, and keep the columns (``widen`` adds to
them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise

import duckdb
import numpy as np
import pyarrow as pa

from ftaudit.eventlog.arrays import conform, int64_array, string_array
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import FILENAME, RunTables, stored, table_of, type_fields

PIECES = 16
"""The most pieces a type's rows are held in: each is a chunk DuckDB scans on its own,
and each move adds one; past this, the two adjacent pieces of fewest rows become one."""


@dataclass(frozen=True)
class _Piece:
    """Some rows of one event type, and the segments they come from."""

    rows: pa.Table
    segments: frozenset[str]

    @classmethod
    def of(cls, rows: pa.Table) -> _Piece:
        return cls(rows, frozenset(rows[FILENAME].unique().to_pylist()))

    def without(self, whole: set[str], below: Mapping[str, int]) -> _Piece:
        """This piece less the rows of the ``whole`` segments and, of the segments in
        ``below``, those before the sequence number given."""
        import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

        paths = self.rows[FILENAME]
        gone = pc.is_in(paths, value_set=string_array(sorted(whole & self.segments)))
        cut = sorted(self.segments.intersection(below))
        if cut:
            # each row's cut (NULL: its segment is not cut) against its seq, in one pass
            # for every cut segment: after a roll each writer's merged segment is cut
            at = pc.index_in(paths, value_set=string_array(cut))
            bound = pc.take(int64_array(np.array([below[p] for p in cut])), at)
            early = pc.less(self.rows["seq"], bound)
            # NULL (not cut) as false, with no Python value: converting one imports pandas
            gone = pc.or_(gone, pc.and_kleene(early, pc.is_valid(early)))
        return _Piece.of(self.rows.filter(pc.invert(gone)))


class _Held:
    """A type's rows as a connection scans them: an Arrow stream of the rows held now
    (the Arrow PyCapsule interface), asked for by every scan, so that a move that swaps
    :attr:`rows` needs no new registration."""

    def __init__(self, rows: pa.Table) -> None:
        self.rows = rows

    def __arrow_c_schema__(self) -> object:
        return self.rows.schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.rows.__arrow_c_stream__(requested_schema)


@dataclass
class WindowTables:
    """The rows of each event type of a connection's run, held as registered Arrow."""

    con: duckdb.DuckDBPyConnection
    schemas: dict[str, pa.Schema]
    """Event type -> the columns of its table."""
    pieces: dict[str, list[_Piece]]
    """Event type -> its rows, oldest piece first."""
    held: dict[str, _Held] = field(default_factory=dict)
    """Event type -> what its table's name is registered as."""

    @classmethod
    def adopt(cls, con: duckdb.DuckDBPyConnection, tables: RunTables) -> WindowTables:
        """Take the rows of ``tables``' DuckDB tables on ``con`` into Arrow (the tables
        are emptied) and register them in their place."""
        window = cls(con, {}, {})
        for name in sorted(tables.types):
            schema = window.schemas[name] = pa.schema(type_fields(tables.schema, name))
            table = stored(name)
            columns = ", ".join(ident(f.name) for f in schema)
            # in time order, in pieces: the window's oldest segments leave first, and the
            # pieces they are alone in are dropped whole
            rows = con.sql(f"SELECT {columns} FROM {table} ORDER BY ts").to_arrow_table()
            # DuckDB's Arrow names a list's child otherwise than the segments' readers do:
            # the same columns, typed as every row appended later will be
            rows = rows.cast(schema).combine_chunks()
            size = -(-rows.num_rows // (PIECES // 2))
            window.pieces[name] = [
                _Piece.of(rows.slice(at, size)) for at in range(0, rows.num_rows, size or 1)
            ]
            # read to the end: DuckDB holds the connection while a result is unread
            con.execute(f"DELETE FROM {table}").fetchall()
            window._register(name)
        return window

    def widen(self, tables: RunTables) -> None:
        """Give each held table the columns ``tables`` now gives its type (NULL in the rows
        held), and hold an empty table for each type new to ``tables``."""
        for name in sorted(tables.types):
            schema = pa.schema(type_fields(tables.schema, name))
            if name in self.schemas and self.schemas[name].equals(schema):
                continue
            self.schemas[name] = schema
            pieces = self.pieces.get(name, [])
            self.pieces[name] = [_Piece(conform(p.rows, schema), p.segments) for p in pieces]
            self.held.pop(name, None)  # registered anew: the views bind its new columns
            self._register(name)

    def move(
        self, drops: pa.Table | None, rows: pa.Table, masks: Mapping[str, pa.ChunkedArray]
    ) -> int:
        """Delete the rows ``drops`` names, as
        :func:`~ftaudit.eventlog.type_tables.delete_below` does in DuckDB's tables, then
        append the rows of ``rows`` (in the run's columns) that each mask of ``masks``
        selects to the table of its event type; returns how many rows were appended."""
        changed = self._delete_below(drops) if drops is not None else set()
        appended = 0
        for name, mask in masks.items():
            # the table's columns, then the rows: filtering every column of the run costs
            # most of a millisecond a type
            new = rows.select(self.schemas[name].names).filter(mask)
            if new.num_rows:
                appended += new.num_rows
                self.pieces[name].append(_Piece.of(new))
                changed.add(name)
        for name in sorted(changed):
            self._bound(name)
            self._register(name)
        return appended

    def _delete_below(self, drops: pa.Table) -> set[str]:
        """Delete the rows ``drops`` names; returns the types whose rows changed."""
        whole: dict[str, set[str]] = {}
        below: dict[str, dict[str, int]] = {}
        listed = (drops[c].to_pylist() for c in ("type", FILENAME, "below"))
        for name, path, seq in zip(*listed, strict=True):
            if seq is None:
                whole.setdefault(name, set()).add(path)
            else:
                below.setdefault(name, {})[path] = seq
        changed = set()
        for name in whole.keys() | below.keys():
            gone, cut = whole.get(name, set()), below.get(name, {})
            kept = []
            for piece in self.pieces[name]:
                if piece.segments <= gone:
                    continue
                if piece.segments.isdisjoint(gone) and piece.segments.isdisjoint(cut):
                    kept.append(piece)
                else:
                    kept.append(piece.without(gone, cut))
            self.pieces[name] = [p for p in kept if p.rows.num_rows]
            changed.add(name)
        return changed

    def _bound(self, name: str) -> None:
        """Join adjacent pieces of ``name`` until it is held in at most :data:`PIECES`."""
        pieces = self.pieces[name]
        while len(pieces) > PIECES:
            sizes = [a.rows.num_rows + b.rows.num_rows for a, b in pairwise(pieces)]
            at = sizes.index(min(sizes))
            a, b = pieces[at], pieces[at + 1]
            joined = pa.concat_tables([a.rows, b.rows]).combine_chunks()
            pieces[at : at + 2] = [_Piece(joined, a.segments | b.segments)]

    def rows(self, name: str) -> pa.Table:
        """The rows of ``name`` held now."""
        pieces = self.pieces.get(name, [])
        if not pieces:
            # not Schema.empty_table(): it imports pandas (0.15 s, at a poll after a roll)
            return pa.Table.from_batches([], schema=self.schemas[name])
        return pa.concat_tables([p.rows for p in pieces])

    def _register(self, name: str) -> None:
        """Hold the rows of ``name`` now for its table's scans (registered the first time)."""
        held = self.held.get(name)
        if held is not None:
            held.rows = self.rows(name)
            return
        held = self.held[name] = _Held(self.rows(name))
        self.con.register(table_of(name), held)


__all__ = ["PIECES", "WindowTables"]
