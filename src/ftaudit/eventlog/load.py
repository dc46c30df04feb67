"""Loading a run's segments into DuckDB, one table per event type, from their explicit paths.

A user's path is never handed to DuckDB: ``read_parquet('g[1]/...')`` treats ``[1]`` as a
glob and reads the files of a sibling run ``g1``, and its per-file state costs memory for
every segment. Instead each listed segment is opened by path here (no glob, no URI
parsing) and its rows are copied into DuckDB in batches, each type's rows into its table
(:mod:`ftaudit.eventlog.type_tables`): memory follows the number of events, not the
number of files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from operator import attrgetter
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.arrays import conform, constant_strings
from ftaudit.eventlog.fanout import Fanout
from ftaudit.eventlog.pool import in_order
from ftaudit.eventlog.reader import (
    UNREADABLE,
    RunScan,
    SegmentInfo,
    check_declared_types,
    open_parquet,
    unreadable,
)
from ftaudit.eventlog.sql import ident, literal, string_list
from ftaudit.eventlog.type_tables import FILENAME, create_tables, table_of, type_fields

BATCH_ROWS = 8_192
"""Rows gathered from small segments before a batch widened to every column of the run
is made (:func:`conformed_batches`): what is held grows with it: at 1.27 M rows of 74
columns, 65,536 rows (66 MB a batch) peaked at 2.01-2.09 GB against 1.78-1.79 GB at
8,192, which cost less CPU too (fewer fresh pages: 5.3-5.8 s against 5.9-7.7 s)."""


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


Footers = Mapping[Path, pq.FileMetaData | pq.ParquetReader]
"""What a reader of a segment's footer kept of it, by path: the parsed footer, or the
reader opened over the file's bytes (:attr:`~ftaudit.eventlog.reader.Footer.opened`)."""


def read_segment(
    info: SegmentInfo,
    footer: pq.FileMetaData | pq.ParquetReader | None = None,
    leaves: Sequence[int] | None = None,
) -> pa.Table:
    """One segment's rows, read from the file opened by its exact path, with its
    :data:`FILENAME` column and no schema metadata (the digests in it differ per file);
    ``footer``: its footer as parsed before (a follower keeps those of its window), or
    the reader its footer was read with over the file's bytes (read and opened once);
    ``leaves``: only the columns stored in these Parquet leaves are decoded (None: all;
    see :func:`leaves_of`)."""
    try:
        if isinstance(footer, pq.ParquetReader):
            parquet = footer
        else:
            with open(info.path, "rb") as f:
                data = f.read()
            # decoded from its bytes: through a Python file object each page read calls
            # back into Python
            parquet = open_parquet(data, footer)
        # one small file: handing each column to the thread pool costs more than it saves
        table = parquet.read_all(column_indices=leaves, use_threads=False)
    except UNREADABLE as exc:
        raise unreadable(info.path, exc, "unreadable") from None
    # here, on the reading thread: the main thread's share is what a second core cannot take
    return table.replace_schema_metadata(None).append_column(
        pa.field(FILENAME, pa.string()), constant_strings(str(info.path), table.num_rows)
    )


def leaves_of(schema: pa.Schema, columns: Collection[str]) -> list[int] | None:
    """The Parquet leaf columns of ``schema``'s fields named in ``columns`` (None: every
    field is): Arrow's reader selects fields by the leaves they are stored in."""
    if all(name in columns for name in schema.names):
        return None
    leaves: list[int] = []
    first = 0
    for field in schema:
        count = _leaf_count(field.type)
        if field.name in columns:
            leaves.extend(range(first, first + count))
        first += count
    return leaves


def _leaf_count(arrow: pa.DataType) -> int:
    """How many Parquet leaf columns store a field of type ``arrow``."""
    if isinstance(arrow, pa.StructType):
        return sum(_leaf_count(arrow.field(i).type) for i in range(arrow.num_fields))
    if isinstance(arrow, pa.MapType):
        return _leaf_count(arrow.key_type) + _leaf_count(arrow.item_type)
    if isinstance(arrow, (pa.ListType, pa.LargeListType, pa.FixedSizeListType)):
        return _leaf_count(arrow.value_type)
    return 1


DECODE_THREADS = max(0, min(4, (os.cpu_count() or 1) - 2))
"""Threads decoding segments ahead of the caller; none where there are two cores or fewer.

Decoding releases the GIL, but it is not all that a load does beside the caller: the
rows go into DuckDB on threads of their own (:mod:`~ftaudit.eventlog.fanout`), and a
follower's Python holds the GIL between Arrow calls. On this project's 2 cores, opening
the largest benchmark run (10,000 steps x 16 cells) took 0.1-1.05 s less CPU decoding in
the caller's thread than on two decoding threads (seven rounds alternating; less wall
time in six), and a follower's poll decoded its 34 new segments in 25-27 ms of CPU
against 36-38 ms: the threads mostly contended for the GIL and the cores. The caller's
thread and the ingest take two cores; decoding ahead gets what is left. (A run of
thousands of unrolled small segments is the exception: threads shortened its load by up
to 2 s of 14-16, for a tenth more CPU.)"""

DECODE_AHEAD = 64
"""At most this many segments decoded ahead of the one the caller waits for."""

DECODE_AHEAD_ROWS = 8_192
"""At most about this many rows decoded ahead (once each thread has a segment): the
decoded tables held stay bounded when the segments are large (compacted ones)."""


def read_segments(
    infos: Iterable[SegmentInfo],
    footers: Footers | None = None,
    columns: Collection[str] | None = None,
) -> Iterator[tuple[SegmentInfo, pa.Table]]:
    """Each segment with its rows (:func:`read_segment`, with its footer from ``footers``
    where they hold it, of ``columns`` only), in the order given, decoded on
    :data:`DECODE_THREADS` threads a few segments ahead (none: as the caller asks).

    Results and errors come back in order (see :func:`~ftaudit.eventlog.pool.in_order`):
    the first unreadable segment is the one reported.
    """
    known = footers if footers is not None else {}
    # by shape: segments of one shape share one interned schema
    leaves: dict[int, list[int] | None] = {}

    def read(info: SegmentInfo) -> pa.Table:
        if columns is None:
            return read_segment(info, known.get(info.path))
        shape = id(info.schema)
        if shape not in leaves:
            leaves[shape] = leaves_of(info.schema, columns)
        return read_segment(info, known.get(info.path), leaves[shape])

    return in_order(
        read,
        infos,
        ahead=DECODE_AHEAD,
        weight=attrgetter("num_rows"),
        max_weight=DECODE_AHEAD_ROWS,
        threads=DECODE_THREADS,
    )


BATCH_SEGMENTS = 256
"""Segments gathered before a batch is handed to DuckDB: each small table read costs some
memory whatever its rows, so the pending ones are bounded in number too."""


def _batches_of(pending: dict[int, list[pa.Table]], schema: pa.Schema) -> list[pa.RecordBatch]:
    """The pending segments as one batch of ``schema``: those of one shape are concatenated
    first (cheap: same columns), widened to the unified schema once per shape, then joined:
    DuckDB's insert costs per batch handed over (34 small segments of 17 shapes, an online
    poll's, went in 240 ms as 17 batches and 145 ms as one)."""
    if not pending:
        return []
    conformed = [conform(pa.concat_tables(tables), schema) for tables in pending.values()]
    return pa.concat_tables(conformed).combine_chunks().to_batches()


def conformed_batches(
    scan: RunScan,
    schema: pa.Schema,
    footers: Footers | None = None,
    trim: Callable[[SegmentInfo, pa.Table], pa.Table] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The run's rows in ``schema``, a bounded batch at a time (raises ``CorruptSegmentError``);
    ``footers``: footers parsed before, by path (see :func:`read_segments`). Only the
    columns of ``schema`` are decoded. ``trim``: the rows of each segment wanted, of the
    rows decoded (before they are widened and joined: a follower wants a few hundred of
    the thousands of rows of a roll's merged segment).

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
        for info, table in read_segments(scan.segments, footers, frozenset(schema.names)):
            if trim is not None:
                table = trim(info, table)
            pending.setdefault(id(info.schema), []).append(table)
            rows += table.num_rows
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
    con: duckdb.DuckDBPyConnection, scan: RunScan, schema: pa.Schema
) -> frozenset[str]:
    """Create on ``con`` the table of each event type the segments' footers list, holding
    that type's rows, for a run of columns ``schema`` (every column of these segments is
    one of its, see :func:`new_columns`); returns those types. Raises
    ``CorruptSegmentError`` for an unreadable segment or one holding rows of a type its
    footer does not list.

    Each segment is decoded once. A run of :data:`STAGED_ROWS` rows or more streams each
    segment's rows to every type it lists (:mod:`~ftaudit.eventlog.fanout`: a statement
    per type, each on a thread of its own); a smaller one is staged whole in one table
    and split by type there: the fan-out's fixed cost (a cursor, a thread and a stream
    statement per type, about 55 ms for the 13 types of a 12-step run) is most of what
    loading such a run costs.
    """
    types = sorted({t for info in scan.segments for t in info.meta.types})
    if sum(info.num_rows for info in scan.segments) < STAGED_ROWS:
        _split_staged(con, scan, schema, types)
    else:
        create_tables(con, schema, types)
        with Fanout(con, schema, types) as fanout:
            for info, table in read_segments(scan.segments):
                fanout.add(info.meta.types, table)
        _check_counts(con, scan, types)
    return frozenset(types)


STAGED_ROWS = 100_000
"""Runs of fewer rows are loaded through one staging table (:func:`load_segments`)."""

_STAGED = "_ftaudit_staged_rows"


def _split_staged(
    con: duckdb.DuckDBPyConnection, scan: RunScan, schema: pa.Schema, types: list[str]
) -> None:
    """Load the run's rows into one temporary table of every column, then create each
    type's table from its rows there (DuckDB's own scans: one over Arrow in all)."""
    _stream(con, scan, schema, f"CREATE TEMP TABLE {_STAGED} AS SELECT * FROM {{source}}")
    try:
        if types:
            con.execute(
                "; ".join(
                    f"CREATE TABLE {ident(table_of(name))} AS "
                    f"SELECT {', '.join(ident(f.name) for f in type_fields(schema, name))} "
                    f"FROM {_STAGED} WHERE type = {literal(name)}"
                    for name in types
                )
            )
        # a row of a type no footer lists is in no table (one its own footer leaves out
        # but another lists is refused with the footers: check_rows); asked of the staged
        # rows, not by _check_counts' count per table (13-24 ms more on a 12-step run)
        left = con.execute(
            f"SELECT min({FILENAME}) FROM {_STAGED} "
            f"WHERE type IS NULL OR NOT list_contains({string_list(types)}, type)"
        ).fetchone()
    finally:
        con.execute(f"DROP TABLE {_STAGED}")
    if left is not None and left[0] is not None:
        _refuse_undeclared(con, next(i for i in scan.segments if str(i.path) == left[0]))


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


def untyped_row(path: str | Path) -> CorruptSegmentError:
    """The error for a segment holding a row of no event type (no table is its)."""
    return CorruptSegmentError(Path(path), "a row with no event type")


def _check_counts(con: duckdb.DuckDBPyConnection, scan: RunScan, types: list[str]) -> None:
    """Every row of every segment is in its type's table: raises ``CorruptSegmentError``
    for the first segment holding a row of a type its footer does not list (no table read
    it there), or of no type."""
    if not types:
        found: dict[str, int] = {}
    else:
        counts = " UNION ALL ".join(
            f"SELECT {FILENAME}, count(*) AS n FROM {ident(table_of(name))} GROUP BY ALL"
            for name in types
        )
        rows = con.execute(f"SELECT {FILENAME}, sum(n) FROM ({counts}) GROUP BY ALL").fetchall()
        found = {path: int(n) for path, n in rows}
    for info in scan.segments:
        if found.get(str(info.path), 0) != info.num_rows:
            _refuse_undeclared(con, info)


_SOURCE = "_ftaudit_segment_rows"


def _refuse_undeclared(con: duckdb.DuckDBPyConnection, info: SegmentInfo) -> None:
    """Raise ``CorruptSegmentError`` for ``info``'s segment, which holds a row of a type
    its footer does not list, or of no type."""
    con.register(_SOURCE, read_segment(info, leaves=leaves_of(info.schema, ("type",))))
    try:
        held = [t for (t,) in con.execute(f"SELECT DISTINCT type FROM {_SOURCE}").fetchall()]
    finally:
        con.unregister(_SOURCE)
    check_declared_types(info.path, held, info.meta)
    raise untyped_row(info.path)


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


__all__ = [
    "FILENAME",
    "conformed_batches",
    "leaves_of",
    "load_segments",
    "new_columns",
    "read_segment",
    "read_segments",
    "unified_schema",
    "untyped_row",
]
