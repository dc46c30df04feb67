"""Loading a run's segments into one DuckDB table, from their explicit paths.

A user's path is never handed to DuckDB: ``read_parquet('g[1]/...')`` treats ``[1]`` as a
glob and reads the files of a sibling run ``g1``, and its per-file state costs memory for
every segment. Instead each listed segment is opened by path here (no glob, no URI
parsing), conformed to the schema that all segments were unified to once, and streamed
into DuckDB in batches: memory follows the number of events, not the number of files.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.arrays import constant_strings
from ftaudit.eventlog.pool import in_order
from ftaudit.eventlog.reader import UNREADABLE, RunScan, SegmentInfo, open_parquet, unreadable
from ftaudit.eventlog.sql import ident

FILENAME = "filename"
"""The column naming each row's segment (as DuckDB's ``filename = true`` did)."""

BATCH_ROWS = 8_192
"""Rows gathered from small segments before a batch is handed to DuckDB. Each batch is
widened to every column of the run, so what is held while loading grows with it: at
1.27 M rows of 74 columns, 65,536 rows (66 MB a batch) peaked at 2.01-2.09 GB against
1.78-1.79 GB at 8,192, which cost less CPU too (fewer fresh pages: 5.3-5.8 s against
5.9-7.7 s, alternating runs)."""


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


def read_segment(info: SegmentInfo, footer: pq.FileMetaData | None = None) -> pa.Table:
    """One segment's rows, read from the file opened by its exact path, with its
    :data:`FILENAME` column and no schema metadata (the digests in it differ per file);
    ``footer``: its footer as parsed before (a follower keeps those of its window)."""
    try:
        with open(info.path, "rb") as f:
            data = f.read()
        # decoded from its bytes: through a Python file object each page read calls back
        # into Python; one small file: handing each column to the thread pool costs more
        # than it saves
        table = open_parquet(data, footer).read_all(use_threads=False)
    except UNREADABLE as exc:
        raise unreadable(info.path, exc, "unreadable") from None
    # here, on the reading thread: the main thread's share is what a second core cannot take
    return table.replace_schema_metadata(None).append_column(
        pa.field(FILENAME, pa.string()), constant_strings(str(info.path), table.num_rows)
    )


DECODE_AHEAD = 64
"""At most this many segments decoded ahead of the one the caller waits for."""

DECODE_AHEAD_ROWS = 8_192
"""At most about this many rows decoded ahead (once each thread has a segment): the
decoded tables held stay bounded when the segments are large (compacted ones)."""


def read_segments(
    infos: Iterable[SegmentInfo], footers: Mapping[Path, pq.FileMetaData] | None = None
) -> Iterator[tuple[SegmentInfo, pa.Table]]:
    """Each segment with its rows (:func:`read_segment`, with its footer from ``footers``
    where they hold it), in the order given, decoded on
    :data:`~ftaudit.eventlog.pool.THREADS` threads a few segments ahead.

    Arrow's decode releases the GIL, so a second core shortens the wall time of loading
    (not its CPU time: the hand-offs add a little). Results and errors come back in order
    (see :func:`~ftaudit.eventlog.pool.in_order`): the first unreadable segment is the one
    reported.
    """
    known = footers if footers is not None else {}
    return in_order(
        lambda info: read_segment(info, known.get(info.path)),
        infos,
        ahead=DECODE_AHEAD,
        weight=attrgetter("num_rows"),
        max_weight=DECODE_AHEAD_ROWS,
    )


BATCH_SEGMENTS = 256
"""Segments gathered before a batch is handed to DuckDB: each small table read costs some
memory whatever its rows, so the pending ones are bounded in number too."""


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with every column of ``schema``, in its order (NULL where it has none)."""
    n = table.num_rows
    # one dict: `table.column_names` builds a list at each access, and a lookup per field
    # in it cost a 112-column run's load 3-4 ms a segment (a follower's poll, per shape)
    held = dict(zip(table.column_names, table.columns, strict=True))
    columns = [held[f.name] if f.name in held else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def _batches_of(pending: dict[int, list[pa.Table]], schema: pa.Schema) -> list[pa.RecordBatch]:
    """The pending segments as one batch of ``schema``: those of one shape are concatenated
    first (cheap: same columns), widened to the unified schema once per shape, then joined:
    DuckDB's insert costs per batch handed over (34 small segments of 17 shapes, an online
    poll's, went in 240 ms as 17 batches and 145 ms as one)."""
    if not pending:
        return []
    conformed = [_conform(pa.concat_tables(tables), schema) for tables in pending.values()]
    return pa.concat_tables(conformed).combine_chunks().to_batches()


def conformed_batches(
    scan: RunScan, schema: pa.Schema, footers: Mapping[Path, pq.FileMetaData] | None = None
) -> Iterator[pa.RecordBatch]:
    """The run's rows in ``schema``, a bounded batch at a time (raises ``CorruptSegmentError``);
    ``footers``: footers parsed before, by path (see :func:`read_segments`).

    Row order across segments is not kept (no reader of the table relies on it: every
    query orders what it needs). Each batch is joined on a thread of its own while the
    next one's segments are gathered: Arrow's concatenation releases the GIL, and on a
    run of small segments this is a tenth of what reading each one costs.
    """
    # keyed by the scan's interned schema object: hashing a wide schema per segment is slow
    pending: dict[int, list[pa.Table]] = {}
    rows = count = 0
    joining: Future[list[pa.RecordBatch]] | None = None
    with ThreadPoolExecutor(1, thread_name_prefix="ftaudit-join") as joiner:
        for info, table in read_segments(scan.segments, footers):
            pending.setdefault(id(info.schema), []).append(table)
            rows += info.num_rows
            count += 1
            if rows >= BATCH_ROWS or count >= BATCH_SEGMENTS:
                if joining is not None:
                    yield from joining.result()
                joining = joiner.submit(_batches_of, pending, schema)
                pending, rows, count = {}, 0, 0
        if joining is not None:
            yield from joining.result()
    yield from _batches_of(pending, schema)


def load_segments(
    con: duckdb.DuckDBPyConnection,
    scan: RunScan,
    table: str,
    schema: pa.Schema | None = None,
) -> pa.Schema:
    """Create ``table`` on ``con`` holding every row of the run's segments, and ``filename``;
    returns the table's schema: ``schema`` (every column of these segments must be one of
    its, see :func:`fits`), by default the segments' unified one."""
    schema = schema if schema is not None else unified_schema(scan)
    _stream(con, scan, schema, f"CREATE TABLE {ident(table)} AS SELECT * FROM {{source}}")
    return schema


def new_columns(scan: RunScan, schema: pa.Schema) -> list[pa.Field] | None:
    """The columns of ``scan``'s segments that ``schema`` lacks, in the order first met
    (empty: it holds them all); None where a column has another type than ``schema``'s
    (or than another segment's)."""
    # each shape once: segments of one shape share one interned schema (a follower's poll
    # of 34 segments looked 1,700 columns up, where its 2 or 3 shapes hold about 150)
    shapes = {id(info.schema): info.schema for info in scan.segments}
    added: dict[str, pa.Field] = {}
    for shape in shapes.values():
        for field in shape:
            index = schema.get_field_index(field.name)
            known = schema.field(index) if index >= 0 else added.get(field.name)
            if known is None:
                added[field.name] = field
            elif known.type != field.type:
                return None
    return list(added.values())


def _stream(
    con: duckdb.DuckDBPyConnection, scan: RunScan, schema: pa.Schema, statement: str
) -> None:
    """Run ``statement`` (reading ``{source}``) over the scan's rows streamed in ``schema``."""
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
        con.execute(statement.format(source=ident(source)))
    except duckdb.Error:
        if failure:
            raise failure[0] from None
        raise
    finally:
        con.unregister(source)


__all__ = [
    "FILENAME",
    "conformed_batches",
    "load_segments",
    "new_columns",
    "read_segment",
    "read_segments",
    "unified_schema",
]
