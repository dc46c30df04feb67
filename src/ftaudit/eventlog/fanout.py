"""Filling every event type's table from one pass over the segments.

Each segment is decoded once, and its rows handed to a statement per event type it
lists: ``INSERT INTO <the type's table> SELECT ... FROM <a stream> WHERE type = ...``,
each running on a cursor of its own thread for the whole load. One statement per table:
DuckDB's many small appends to a table cost it 3-5 times what one statement streaming
the same rows does (it compacts and compresses the row groups each leaves); and one
decode per segment: a statement per type run one after another decoded each segment
once per type it lists (1.25 s against 2.97 s at the largest benchmark's size).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from types import TracebackType

import duckdb
import pyarrow as pa

from ftaudit.eventlog.arrays import conform
from ftaudit.eventlog.connections import cursor_of
from ftaudit.eventlog.sql import ident, literal
from ftaudit.eventlog.type_tables import table_of, type_fields

GATHER_ROWS = 8_192
"""Rows of one type's stream gathered before they are handed to DuckDB as one batch: it
costs per batch handed over (34 small segments went in 240 ms as 17 batches and 145 ms
as one)."""

_QUEUED = 4
"""Batches waiting for each type's statement: what is held stays bounded."""

_DONE = object()
_STOP = object()
"""Handed to a feed whose load stopped before its stream ended (an error elsewhere): its
statement fails, and the error that stopped the load is the one raised."""


class _Feed:
    """One event type's statement, on its own thread, and the batches it reads."""

    def __init__(self, con: duckdb.DuckDBPyConnection, schema: pa.Schema, name: str) -> None:
        self.name = name
        self.schema = pa.schema(type_fields(schema, name))
        self.names = frozenset(self.schema.names)
        self.pending: list[pa.Table] = []
        self.rows = 0
        self.batches: queue.Queue[object] = queue.Queue(_QUEUED)
        self.failure: BaseException | None = None
        self._cursor = cursor_of(con)
        self._thread = threading.Thread(target=self._run, name=f"ftaudit-load-{name}", daemon=True)
        self._thread.start()

    def add(self, table: pa.Table) -> None:
        """Take ``table``'s rows (a segment's, of every type it holds) for this type."""
        present = [name for name in table.column_names if name in self.names]
        self.pending.append(table.select(present))
        self.rows += table.num_rows
        if self.rows >= GATHER_ROWS:
            self.flush()

    def flush(self) -> None:
        """Hand what was gathered to the statement as one batch."""
        if not self.pending:
            return
        # tables concatenate only where their fields agree (type and nullability too: a
        # forged segment may differ there), so each shape is conformed on its own
        by_shape: dict[tuple[tuple[str, pa.DataType, bool], ...], list[pa.Table]] = {}
        for table in self.pending:
            shape = tuple((f.name, f.type, f.nullable) for f in table.schema)
            by_shape.setdefault(shape, []).append(table)
        conformed = [conform(pa.concat_tables(t), self.schema) for t in by_shape.values()]
        self.pending, self.rows = [], 0
        self._put(pa.concat_tables(conformed))

    def _put(self, item: object) -> None:
        while self._thread.is_alive():
            try:
                self.batches.put(item, timeout=0.1)
                return
            except queue.Full:
                continue  # the statement is reading, or it failed (then its thread ends)

    def finish(self) -> None:
        """The last batch has been handed over: wait for the statement to end."""
        self.flush()
        self._put(_DONE)
        self._thread.join()

    def stop(self) -> None:
        """End the statement early (another feed or the decoding failed)."""
        while True:  # room for the stop: what is queued is not read any more
            try:
                self.batches.get_nowait()
            except queue.Empty:
                break
        self._put(_STOP)
        self._thread.join()

    def _stream(self) -> Iterator[pa.RecordBatch]:
        while True:
            item = self.batches.get()
            if item is _DONE:
                return
            if item is _STOP:
                raise RuntimeError(f"the load of {self.name} rows stopped")
            assert isinstance(item, pa.Table)
            yield from item.to_batches()

    def _run(self) -> None:
        reader = pa.RecordBatchReader.from_batches(self.schema, self._stream())
        source = f"_ftaudit_rows_in_{self.name}"
        columns = ", ".join(ident(name) for name in self.schema.names)
        try:
            self._cursor.register(source, reader)
            self._cursor.execute(
                f"INSERT INTO {ident(table_of(self.name))} ({columns}) "
                f"SELECT {columns} FROM {ident(source)} WHERE type = {literal(self.name)}"
            )
        except BaseException as exc:  # handed to the loading thread, which raises it
            self.failure = exc
        finally:
            self._cursor.close()


class Fanout:
    """Hands each segment's rows to the statement of every type it lists; a context
    manager: leaving it without an error waits for every statement to end and raises
    what one of them failed with."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, schema: pa.Schema, event_types: Iterable[str]
    ) -> None:
        self._feeds: dict[str, _Feed] = {}
        try:
            for name in event_types:
                self._feeds[name] = _Feed(con, schema, name)
        except BaseException:
            self._stop()
            raise

    def add(self, types: Iterable[str], table: pa.Table) -> None:
        """Take a segment's rows (``table``), listing ``types``."""
        for name in types:
            feed = self._feeds[name]
            if feed.failure is not None:
                raise feed.failure
            feed.add(table)

    def __enter__(self) -> Fanout:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._stop()
            return
        try:
            for feed in self._feeds.values():
                feed.finish()
        except BaseException:
            self._stop()  # or the statements still reading hold the connection
            raise
        failed = next((f.failure for f in self._feeds.values() if f.failure is not None), None)
        if failed is not None:
            raise failed

    def _stop(self) -> None:
        for feed in self._feeds.values():
            feed.stop()


__all__ = ["GATHER_ROWS", "Fanout"]
