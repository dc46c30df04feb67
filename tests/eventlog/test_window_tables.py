"""A moving window's rows held as Arrow tables (``eventlog.window_tables``): each move
leaves the views reading exactly the rows DuckDB's own tables would hold after the same
``INSERT`` and ``DELETE`` statements, in the same columns and types."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ftaudit.eventlog import scan_run, window_tables
from ftaudit.eventlog.connections import open_memory
from ftaudit.eventlog.load import FILENAME, conformed_batches, new_columns
from ftaudit.eventlog.reader import RunScan, SegmentInfo
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.sql import ident, literal
from ftaudit.eventlog.type_tables import RunTables, delete_below, stored, table_of, type_fields
from ftaudit.eventlog.views import create_views, lock_down, widen
from ftaudit.eventlog.window_tables import WindowTables
from ftaudit.synth import SynthConfig, synthesize


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = SynthConfig(steps=8, restarts=1, retries=1, buffer_size=4_096, samples_per_step=64)
    return synthesize(tmp_path_factory.mktemp("window") / "run", config).run_dir


def _open(scan: RunScan) -> tuple[duckdb.DuckDBPyConnection, RunTables]:
    con = open_memory()
    tables = create_views(con, scan, default_registry, manifests=False)
    lock_down(con)  # as a session's: registering works on a locked connection
    return con, tables


def _insert(con: duckdb.DuckDBPyConnection, tables: RunTables, rows: pa.Table) -> None:
    """What a window's move did before it was held in Arrow: an INSERT per type."""
    con.register("new_rows", rows)
    for name in sorted(set(rows["type"].to_pylist())):
        columns = ", ".join(ident(f.name) for f in type_fields(tables.schema, name))
        con.execute(
            f"INSERT INTO {ident(table_of(name))} BY NAME SELECT {columns} FROM new_rows "
            f"WHERE type = {literal(name)}"
        ).fetchall()
    con.unregister("new_rows")


def _viewed(con: duckdb.DuckDBPyConnection, tables: RunTables) -> dict[str, list[tuple]]:
    """Every type's view and ``events``, ordered: what the rules read."""
    out = {
        name: con.execute(f"FROM {ident(name)} ORDER BY segment, seq").fetchall()
        for name in sorted(tables.types)
    }
    out["events"] = con.execute("FROM events ORDER BY segment, seq").fetchall()
    return out


def _drops(whole: list[SegmentInfo], cuts: list[tuple[SegmentInfo, int]]) -> pa.Table:
    """Every row of the ``whole`` segments, and of each cut segment those before its
    sequence number."""
    listed = [(t, str(i.path), None) for i in whole for t in i.meta.types]
    listed += [(t, str(cut.path), below) for cut, below in cuts for t in cut.meta.types]
    types, paths, belows = zip(*listed, strict=True) if listed else ((), (), ())
    return pa.table(
        [pa.array(types, pa.string()), pa.array(paths, pa.string()), pa.array(belows, pa.int64())],
        names=["type", FILENAME, "below"],
    )


def test_moves_held_in_arrow_leave_the_rows_duckdbs_tables_would(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window moved along the run two segments at a time (one or two segments cut
    inside at every third move) reads, after each move, what DuckDB's tables read after the same
    ``DELETE`` and ``INSERT``: pieces dropped whole, filtered and joined alike."""
    monkeypatch.setattr(window_tables, "PIECES", 3)  # joined often, on this small run
    scan = scan_run(run)
    segments = sorted(scan.segments, key=lambda i: (i.meta.first_seq, str(i.path)))
    start = len(segments) // 3
    loaded = RunScan(scan.run_dir, tuple(segments[:start]), ())
    sql, sql_tables = _open(loaded)
    arrow, arrow_tables = _open(loaded)
    window = WindowTables.adopt(arrow, arrow_tables)
    for name in sorted(arrow_tables.types):  # the DuckDB tables are emptied, not read
        assert arrow.execute(f"SELECT count(*) FROM {stored(name)}").fetchall() == [(0,)]
    assert _viewed(arrow, arrow_tables) == _viewed(sql, sql_tables)
    oldest = moves = widened = 0
    for at in range(start, len(segments), 2):
        later = segments[at : at + 2]
        new = RunScan(scan.run_dir, tuple(later), ())
        added = new_columns(new, sql_tables.schema)
        assert added is not None
        types = {t for i in later for t in i.meta.types} - sql_tables.types
        if added or types:  # as a session's move: the window's types and columns grow
            upto = RunScan(scan.run_dir, tuple(segments[: at + 2]), ())
            sql_tables = widen(sql, upto, default_registry, sql_tables, added, types)
            arrow_tables = widen(arrow, upto, default_registry, arrow_tables, added, types)
            window.widen(arrow_tables)
            widened += 1
        rows = pa.Table.from_batches(
            list(conformed_batches(new, sql_tables.schema)), sql_tables.schema
        )
        gone = segments[oldest : oldest + 2]
        oldest += 2
        # every third move cuts the oldest segment left inside, every sixth the two
        # oldest (after a roll each writer's merged segment is cut at once)
        cut = [] if moves % 3 else segments[oldest : oldest + 1 + (moves % 6 == 0)]
        cuts = [(c, (c.meta.first_seq + c.meta.last_seq) // 2 + 1) for c in cut if c.num_rows > 1]
        drops = _drops(gone, cuts)
        delete_below(sql, drops)
        _insert(sql, sql_tables, rows)
        names = sorted(set(rows["type"].to_pylist()))
        masks = {name: pc.equal(rows["type"], name) for name in names}
        assert window.move(drops, rows, masks) == rows.num_rows
        assert _viewed(arrow, arrow_tables) == _viewed(sql, sql_tables), at
        assert all(len(p) <= 3 for p in window.pieces.values())
        moves += 1
    assert moves > 3 and widened  # a type new to the window
    sql.close()
    arrow.close()


def test_a_widened_window_holds_the_new_column_and_type(run: Path) -> None:
    """A held type's new column is added to its DuckDB table too, named in full (the
    registered rows' name comes first in the search path, and DuckDB will not alter
    them), and NULL in the rows held; a new type's table is empty."""
    scan = scan_run(run)
    types = {t for info in scan.segments for t in info.meta.types}
    name = "step_end"
    absent = next(t for t in default_registry if t.name not in types).name
    con, tables = _open(scan)
    window = WindowTables.adopt(con, tables)
    before = con.execute(f"SELECT count(*) FROM {table_of(name)}").fetchall()
    field = pa.field(f"{name}.added_later", pa.int64())
    tables = widen(con, scan, default_registry, tables, [field], [absent])
    window.widen(tables)
    assert con.execute(
        f'SELECT count(*), count("{field.name}") FROM {table_of(name)}'
    ).fetchall() == [(before[0][0], 0)]
    assert con.execute(f"SELECT count(*) FROM {ident(absent)}").fetchall() == [(0,)]
    con.close()
