"""The loaded run in DuckDB: one table per event type (``eventlog.type_tables``), each
holding exactly that type's rows with the envelope, its own columns and ``filename``;
and the loader's decoding of only some columns of a segment (``load.leaves_of``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog import connect, load, scan_run
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.fanout import Fanout
from ftaudit.eventlog.load import FILENAME, leaves_of, read_segment
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import create_tables, table_of
from ftaudit.synth import SynthConfig, synthesize
from tests.support.corrupt import forge_digest, load_segment, segments


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = SynthConfig(steps=8, restarts=1, retries=1, buffer_size=4_096, samples_per_step=64)
    return synthesize(tmp_path_factory.mktemp("tables") / "run", config).run_dir


@pytest.fixture(params=["staged", "fanned out"])
def way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the loader fills the tables: a small run through one staging table, a
    large one fanned out to a statement per type (``load.STAGED_ROWS``)."""
    monkeypatch.setattr(load, "STAGED_ROWS", 10**9 if request.param == "staged" else 0)
    return str(request.param)


def test_each_type_has_a_table_of_its_rows_and_columns_only(run: Path, way: str) -> None:
    scan = scan_run(run)
    declared = {t for info in scan.segments for t in info.meta.types}
    con = connect(run)
    total = 0
    for name in sorted(declared):
        table = ident(table_of(name))
        columns = [row[0] for row in con.execute(f"DESCRIBE {table}").fetchall()]
        own = [c for c in columns if c not in ENVELOPE_COLUMNS and c != FILENAME]
        assert set(ENVELOPE_COLUMNS) <= set(columns) and FILENAME in columns, name
        assert own and all(c.startswith(f"{name}.") for c in own), (name, own)
        types = con.execute(f"SELECT DISTINCT type FROM {table}").fetchall()
        assert types == [(name,)], name
        # every row of a segment listing the type, from that segment
        files = {f for (f,) in con.execute(f"SELECT DISTINCT {FILENAME} FROM {table}").fetchall()}
        assert files == {str(i.path) for i in scan.segments if name in i.meta.types}, name
        total += con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    assert total == sum(i.num_rows for i in scan.segments)
    assert con.execute("SELECT count(*) FROM events").fetchone()[0] == total
    # a registered type no segment holds has a view with its columns and no row
    assert "metric" not in declared
    assert con.execute('SELECT count(*), count("values") FROM metric').fetchone() == (0, 0)
    con.close()


def test_a_segment_read_for_some_columns_holds_those_as_a_full_read_does(run: Path) -> None:
    """Nested columns (structs of lists, maps, lists) are stored in several Parquet
    leaves each: the fields asked for, and no other, come back with a full read's values."""
    scan = scan_run(run)
    for info in scan.segments:
        whole = read_segment(info)
        names = info.schema.names
        for wanted in (names[::2], names[1::3], names[-1:], ["type"], names):
            got = read_segment(info, leaves=leaves_of(info.schema, wanted))
            expected = [n for n in names if n in wanted]
            assert got.column_names == [*expected, FILENAME], info.path
            assert got.equals(whole.select([*expected, FILENAME])), info.path


def _tables(run: Path) -> dict[str, list[tuple]]:
    con = connect(run)
    names = sorted({t for info in scan_run(run).segments for t in info.meta.types})
    out = {
        n: con.execute(f"FROM {ident(table_of(n))} ORDER BY {FILENAME}, seq").fetchall()
        for n in names
    }
    con.close()
    return out


def test_both_ways_of_loading_fill_the_same_tables(
    run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(load, "STAGED_ROWS", 10**9)
    staged = _tables(run)
    monkeypatch.setattr(load, "STAGED_ROWS", 0)
    assert _tables(run) == staged


@pytest.mark.parametrize("forgery", ["no type", "a type no footer lists"])
def test_a_row_in_no_table_is_refused_naming_its_segment(
    run: Path, tmp_path: Path, way: str, forgery: str
) -> None:
    """A row whose type is NULL, or one no segment's footer lists, would go to no table:
    either way of loading refuses the segment holding it, naming it."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    seg = next(
        s for s in segments(copy) if "step_end" in load_segment(s)[1][b"ftaudit.types"].decode()
    )
    table, meta = load_segment(seg)
    values = table.column("type").to_pylist()
    values[len(values) // 2] = None if forgery == "no type" else "not_a_type"
    field = pa.field("type", pa.string(), nullable=True)
    forge_digest(seg, table.set_column(0, field, pa.array(values, pa.string())), meta)
    with pytest.raises(CorruptSegmentError, match=seg.name) as raised:
        connect(copy).close()
    why = "no event type" if forgery == "no type" else "rows of type 'not_a_type'"
    assert why in str(raised.value)


@pytest.mark.timeout(120)  # the defect this guards against was a hang
def test_a_batch_that_fails_at_the_last_flush_stops_every_statement() -> None:
    """Rows that cannot take the run's column types fail when the fan-out hands over its
    last batch, on leaving the ``with``: the error is raised, every type's statement ends
    and the connection is free again (not held by a statement still reading)."""
    schema = pa.schema(
        [pa.field("type", pa.string()), pa.field("a.x", pa.int64()), pa.field("b.y", pa.int64())]
    )
    con = duckdb.connect()
    create_tables(con, schema, ["a", "b"])
    good = pa.table({"type": ["a"], "a.x": pa.array([1], pa.int64())})
    bad = pa.table({"type": ["b"], "b.y": ["not a number"]})
    with pytest.raises(pa.ArrowInvalid), Fanout(con, schema, ["a", "b"]) as fanout:
        fanout.add(["a"], good)
        fanout.add(["b"], bad)
    assert con.execute("SELECT count(*) FROM _rows_b").fetchone() == (0,)
    con.close()
