"""The SQL views over a run's segments: one per event type, ``events``, ``metrics``, the
checkpoint snapshot views and the data-identity views over the run's dataset manifests.
All view DDL of the event log is built here.
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb
import pyarrow as pa

from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS, ENVELOPE_SCHEMA
from ftaudit.eventlog.load import load_segments, unified_schema
from ftaudit.eventlog.manifest_table import MANIFEST_ITEMS, MANIFESTS, create_manifest_tables
from ftaudit.eventlog.reader import RunScan
from ftaudit.eventlog.registry import EventRegistry
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import (
    FILENAME,
    RunTables,
    add_columns,
    create_tables,
    duckdb_types,
    table_of,
)


def _type_views(
    con: duckdb.DuckDBPyConnection,
    scan: RunScan,
    registry: EventRegistry,
    tables: RunTables,
) -> dict[str, str]:
    """``{view name: SELECT}`` for every registered type and every type found on disk, and
    ``events``."""
    present = {f.name: f.type for f in tables.schema}
    # no segment has these fields yet (or any more), or the type has no table: each
    # becomes a typed NULL column
    absent = {
        field.name: field.type
        for event_type in registry
        for field in event_type.arrow_fields
        if field.name not in present or event_type.name not in tables.types
    }
    # the envelope too, for the views of types with no table
    absent.update({f.name: f.type for f in ENVELOPE_SCHEMA})
    absent_types = dict(zip(absent, duckdb_types(con, list(absent.values())), strict=True))
    envelope = ", ".join(ident(c) for c in ENVELOPE_COLUMNS)
    no_rows = ", ".join(f"CAST(NULL AS {absent_types[c]}) AS {ident(c)}" for c in ENVELOPE_COLUMNS)
    no_rows_segment = "CAST(NULL AS VARCHAR) AS segment"

    def select(name: str, cols: list[str]) -> str:
        if name in tables.types:
            return (
                f"SELECT {', '.join([envelope, *cols])}, {FILENAME} AS segment "
                f"FROM {ident(table_of(name))}"
            )
        return f"SELECT {', '.join([no_rows, *cols])}, {no_rows_segment} WHERE false"

    views: dict[str, str] = {}
    for event_type in registry:
        cols = []
        for (name, _, _), field in zip(event_type.stored, event_type.arrow_fields, strict=True):
            if field.name in present and event_type.name in tables.types:
                cols.append(f"{ident(field.name)} AS {ident(name)}")
            else:
                cols.append(f"CAST(NULL AS {absent_types[field.name]}) AS {ident(name)}")
        views[event_type.name] = select(event_type.name, cols)
    # types written by code this process has not imported: their columns say their shape
    on_disk = {t for s in scan.segments for t in s.meta.types} - views.keys()
    for name in sorted(on_disk):
        prefix = f"{name}."
        cols = [f"{ident(c)} AS {ident(c[len(prefix) :])}" for c in present if c.startswith(prefix)]
        views[name] = select(name, cols)
    views["events"] = " UNION ALL ".join(
        f"SELECT {envelope}, {FILENAME} AS segment FROM {ident(table_of(name))}"
        for name in sorted(tables.types)
    ) or select("", [])
    return views


DERIVED_VIEWS: dict[str, str] = {
    "metrics": """
        SELECT incarnation, writer, seq, ts, source_kind, source_cell AS cell,
               source_rank AS rank, step, attempt,
               unnest(map_keys("values")) AS name, unnest(map_values("values")) AS value
        FROM metric""",
    "checkpoints": """
        SELECT iteration, incarnation, complete, path, writer AS saved_by, seq, ts
        FROM checkpoint_saved""",
    "checkpoint_snapshots": """
        SELECT iteration, incarnation, complete, writer AS recorded_by,
               unnest(map_keys(writers)) AS writer, unnest(map_values(writers)) AS last_seq
        FROM checkpoint_saved""",
    "resumes": """
        SELECT incarnation, resumed_from.iteration AS resumed_iteration,
               resumed_from.incarnation AS resumed_incarnation, buffer_size, ts
        FROM run_started""",
    # Events of the incarnation that saved a checkpoint, written after the snapshot that a
    # later incarnation resumed from: rolled back, yet kept on disk for the verifier.
    "rolled_back_events": """
        WITH resumed AS (
            SELECT r.incarnation AS resumed_by, r.resumed_iteration, r.resumed_incarnation
            FROM resumes r WHERE r.resumed_iteration IS NOT NULL),
        snap AS (
            SELECT s.iteration, s.incarnation, s.writer, max(s.last_seq) AS last_seq
            FROM checkpoint_snapshots s GROUP BY ALL),
        marked AS (
            SELECT c.iteration, c.incarnation, min(c.ts) AS ts
            FROM checkpoints c WHERE c.complete GROUP BY ALL)
        SELECT e.*, r.resumed_by, r.resumed_iteration
        FROM events e
        JOIN resumed r ON e.incarnation = r.resumed_incarnation
        LEFT JOIN snap s ON s.iteration = r.resumed_iteration
             AND s.incarnation = r.resumed_incarnation AND s.writer = e.writer
        LEFT JOIN marked m ON m.iteration = r.resumed_iteration
             AND m.incarnation = r.resumed_incarnation
        WHERE (s.last_seq IS NOT NULL AND e.seq > s.last_seq)
           OR (s.last_seq IS NULL AND e.ts > m.ts)""",
}


MACROS: dict[str, str] = {
    # Id sets are stored as runs (``{starts: [...], lengths: [...]}``); this expands one
    # to its ids, in stored order, for ad-hoc queries: ``unnest(expand_runs(nonzero_ids))``.
    "expand_runs(runs)": """
        CASE WHEN runs IS NULL THEN NULL ELSE flatten(list_transform(
            list_zip(runs.starts, runs.lengths), lambda r: range(r[1], r[1] + r[2]))) END""",
}


DATA_VIEWS: dict[str, str] = {
    # Every item of every dataset manifest the run keeps (``manifests/<digest>.parquet``).
    "manifest_items": f"""
        SELECT m.digest, i.item, i.fingerprint
        FROM {ident(MANIFEST_ITEMS)} i JOIN {ident(MANIFESTS)} m USING (manifest)""",
    # One row per sample a trainer rank fed: its stream position, the fingerprint of what
    # the model received, and the item the loader said it read (NULL: it said nothing).
    "fed_samples": """
        SELECT incarnation, step, attempt, cell, source_rank AS rank, writer, seq,
               unnest(expand_runs(sample_indices)) AS sample_index,
               unnest(fingerprints) AS fingerprint, unnest(items) AS loader_item
        FROM sample_fingerprints""",
    # Each fed sample with the manifest its incarnation declared and the items of that
    # manifest whose content it is (empty: the content is no item of the dataset).
    "fed_content": """
        WITH declared AS (SELECT DISTINCT incarnation, digest FROM data_manifest)
        SELECT f.incarnation, f.step, f.attempt, f.cell, f.rank, f.writer, f.seq,
               f.sample_index, f.fingerprint, f.loader_item, d.digest AS manifest,
               coalesce(list(m.item ORDER BY m.item) FILTER (WHERE m.item IS NOT NULL),
                        CAST([] AS BIGINT[])) AS content_items
        FROM fed_samples f
        LEFT JOIN declared d USING (incarnation)
        LEFT JOIN manifest_items m ON m.digest = d.digest AND m.fingerprint = f.fingerprint
        GROUP BY ALL""",
}


def create_views(
    con: duckdb.DuckDBPyConnection,
    scan: RunScan,
    registry: EventRegistry,
    *,
    manifests: bool = True,
) -> RunTables:
    """Load the run's segments into tables on ``con`` (one per event type) and create
    every view over them; returns what was loaded.

    The rows are copied in (from the scan's explicit file list, see
    :mod:`ftaudit.eventlog.load`), so no view reads a file: external file access can be
    switched off afterwards without breaking them. ``manifests=False`` leaves the
    dataset manifests out (the data views are then empty of manifest items).
    """
    # the tables' row order is no reader's concern (every query orders what it needs, as
    # the loader's batches never kept the segments' order): a parallel insert free to
    # reorder costs a third less CPU (3.4-3.7 s against 2.2-2.7 s at 1.27 M rows); results
    # of queries without ORDER BY keep the table's order again afterwards
    schema = unified_schema(scan)
    con.execute("SET preserve_insertion_order = false")
    try:
        tables = RunTables(schema, load_segments(con, scan, schema))
    finally:
        con.execute("RESET preserve_insertion_order")
    for name, select in _type_views(con, scan, registry, tables).items():
        con.execute(f"CREATE VIEW {ident(name)} AS {select}")
    for name, select in DERIVED_VIEWS.items():
        con.execute(f"CREATE VIEW {ident(name)} AS {select}")
    for signature, body in MACROS.items():
        con.execute(f"CREATE MACRO {signature} AS ({body})")
    create_manifest_tables(con, scan.run_dir, load=manifests)
    for name, select in DATA_VIEWS.items():
        con.execute(f"CREATE VIEW {ident(name)} AS {select}")
    return tables


def widen(
    con: duckdb.DuckDBPyConnection,
    scan: RunScan,
    registry: EventRegistry,
    tables: RunTables,
    fields: list[pa.Field],
    event_types: Collection[str],
) -> RunTables:
    """Add ``fields`` to the run's columns (NULL in the rows held) and a table for each of
    ``event_types`` that has none, and point the views at them; returns the run's tables.

    ``scan``: the segments the tables hold or are about to (the types they name)."""
    widened = RunTables(pa.schema([*tables.schema, *fields]), tables.types | frozenset(event_types))
    add_columns(con, tables.types, fields)
    create_tables(con, widened.schema, sorted(widened.types - tables.types))
    for name, select in _type_views(con, scan, registry, widened).items():
        con.execute(f"CREATE OR REPLACE VIEW {ident(name)} AS {select}")
    return widened


def lock_down(con: duckdb.DuckDBPyConnection) -> None:
    """No file access from here on: queries see the views and nothing else on disk.

    DuckDB keeps its temp directory (``<cwd>/.tmp`` by default) usable when external
    access is off, so ``COPY ... TO '.tmp/x'``, ``read_csv('.tmp/...')`` and ``ATTACH``
    would still work there: the connection gets no temp directory at all (a query that
    would spill to disk fails instead).
    """
    con.execute("SET temp_directory = ''")
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
