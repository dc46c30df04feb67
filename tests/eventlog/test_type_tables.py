"""The loaded run in DuckDB: one table per event type (``eventlog.type_tables``), each
holding exactly that type's rows with the envelope, its own columns and ``filename``;
and the loader's decoding of only some columns of a segment (``load.leaves_of``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.eventlog import connect, scan_run
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.load import FILENAME, leaves_of, read_segment
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import table_of
from ftaudit.synth import SynthConfig, synthesize


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = SynthConfig(steps=8, restarts=1, retries=1, buffer_size=4_096, samples_per_step=64)
    return synthesize(tmp_path_factory.mktemp("tables") / "run", config).run_dir


def test_each_type_has_a_table_of_its_rows_and_columns_only(run: Path) -> None:
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
