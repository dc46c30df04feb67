"""Loading a run's segments into one DuckDB table, from their explicit paths.

A user's path is never handed to DuckDB: ``read_parquet('g[1]/...')`` treats ``[1]`` as a
glob and reads the files of a sibling run ``g1``, and its per-file state costs memory for
every segment. Instead each listed segment is opened by path here (no glob, no URI
parsing), conformed to the schema that all segments were unified to once, and streamed
into DuckDB in batches: memory follows the number of events, not the number of files.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.arrays import constant_strings
from ftaudit.eventlog.reader import UNREADABLE, RunScan, SegmentInfo
from ftaudit.eventlog.sql import ident

FILENAME = "filename"
"""The column naming each row's segment (as DuckDB's ``filename = true`` did)."""

BATCH_ROWS = 65_536
"""Rows gathered from small segments before a batch is handed to DuckDB."""


def unified_schema(scan: RunScan) -> pa.Schema:
    """Every column of every segment, once; a column two segments type differently is an error."""
    distinct: dict[pa.Schema, SegmentInfo] = {}
    for info in scan.segments:
        distinct.setdefault(info.schema, info)
    try:
        schema = pa.unify_schemas(list(distinct))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise CorruptSegmentError(
            scan.run_dir, f"segments cannot be read together: {' '.join(str(exc).split())}"
        ) from None
    return schema.append(pa.field(FILENAME, pa.string()))


def read_segment(info: SegmentInfo) -> pa.Table:
    """One segment's rows, read from the file opened by its exact path."""
    try:
        with open(info.path, "rb") as f:
            return pq.ParquetFile(f).read()
    except UNREADABLE as exc:
        raise CorruptSegmentError(info.path, f"unreadable ({exc})") from None


def _conform(table: pa.Table, schema: pa.Schema, filename: str) -> pa.Table:
    n = table.num_rows
    columns = []
    for field in schema:
        if field.name == FILENAME:
            columns.append(constant_strings(filename, n))
        elif field.name in table.column_names:
            columns.append(table.column(field.name))
        else:
            columns.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def conformed_batches(scan: RunScan, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The run's rows in ``schema``, a bounded batch at a time (raises ``CorruptSegmentError``)."""
    pending: list[pa.Table] = []
    rows = 0
    for info in scan.segments:
        pending.append(_conform(read_segment(info), schema, str(info.path)))
        rows += info.num_rows
        if rows >= BATCH_ROWS:
            yield from pa.concat_tables(pending).combine_chunks().to_batches()
            pending, rows = [], 0
    if pending:
        yield from pa.concat_tables(pending).combine_chunks().to_batches()


def load_segments(con: duckdb.DuckDBPyConnection, scan: RunScan, table: str) -> None:
    """Create ``table`` on ``con`` holding every row of the run's segments, and ``filename``."""
    schema = unified_schema(scan)
    failure: list[CorruptSegmentError] = []

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from conformed_batches(scan, schema)
        except CorruptSegmentError as exc:
            failure.append(exc)  # DuckDB rewraps what the stream raises: keep the original
            raise

    reader = pa.RecordBatchReader.from_batches(schema, batches())
    source = "_ftaudit_segment_stream"
    con.register(source, reader)
    try:
        con.execute(f"CREATE TABLE {ident(table)} AS SELECT * FROM {ident(source)}")
    except duckdb.Error:
        if failure:
            raise failure[0] from None
        raise
    finally:
        con.unregister(source)


__all__ = ["FILENAME", "conformed_batches", "load_segments", "read_segment", "unified_schema"]
