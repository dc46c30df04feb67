"""Rows read straight from DuckDB equal the Arrow path's, or the Arrow path is taken."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from ftaudit.errors import QueryError
from ftaudit.verifier.result_rows import row_maker
from ftaudit.verifier.session import Session

CONVERTED = """
    SELECT * FROM (VALUES
        (1::BIGINT, 'a', true, 1.5::DOUBLE, 'nan'::DOUBLE, 2.50::DECIMAL(10, 2), 'x'::BLOB,
         [1, NULL, 3]::BIGINT[], {'s': 'y', 'l': [MAP {'k': 1}]},
         MAP {1: {'ranks': ['normal'], 'errored': false}}, MAP {'a': MAP {'b': 1::HUGEINT}},
         3::HUGEINT, NULL, 4::UBIGINT, 5::TINYINT),
        (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
         NULL),
        (2, '', false, -0.0, 'inf', 0, '', [], {'s': NULL, 'l': []}, MAP {}, MAP {},
         -170141183460469231731687303715884105727::HUGEINT, NULL, 0, -128))
    AS t(i, v, b, d, nan, dec, blob, l, st, m, nested, h, n, u, t)"""
"""Every type :func:`row_maker` converts, with NULLs, empties and extremes."""

ARROW_ONLY = (
    "SELECT TIMESTAMPTZ '2024-01-01 00:00:00+00' AS ts",
    "SELECT INTERVAL 1 DAY AS iv",
    "SELECT uuid() AS u",
    "SELECT [1, 2]::BIGINT[2] AS a",
    "SELECT 1.5::FLOAT AS f",
    "SELECT [TIMESTAMP '2024-01-01'] AS nested_ts",
    "SELECT 1 AS x, 2 AS x",
)


def _arrow(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, object]]:
    return con.sql(sql).to_arrow_table().to_pylist()


def test_converted_values_equal_the_arrow_path() -> None:
    con = duckdb.connect(":memory:")
    try:
        cursor = con.execute(CONVERTED)
        make = row_maker(cursor.description)
        assert make is not None
        fast = make(cursor.fetchall())
        assert repr(fast) == repr(_arrow(con, CONVERTED))  # repr: nan == nan, types too
    finally:
        con.close()


@pytest.mark.parametrize("sql", ARROW_ONLY)
def test_types_not_known_to_convert_take_the_arrow_path(sql: str) -> None:
    con = duckdb.connect(":memory:")
    try:
        cursor = con.execute(sql)
        assert row_maker(cursor.description) is None
        cursor.fetchall()
    finally:
        con.close()


def test_session_rows_equal_the_arrow_rows_and_fail_as_queries(good_run: Path) -> None:
    with Session.open(good_run) as session:
        for sql in (
            CONVERTED,
            *ARROW_ONLY[:2],
            "SELECT step, attempt, cells FROM committed_steps ORDER BY step",
            "SELECT * FROM witness_allocated ORDER BY writer, seq",
        ):
            got = session.rows(sql, label="probe")
            assert repr(got) == repr(session.query(sql, label="probe").to_pylist()), sql
        assert session.rows("CREATE TEMP VIEW probe AS SELECT 1", label="probe") == []
        with pytest.raises(QueryError, match="probe failed"):
            session.rows("SELECT no_such_column FROM events", label="probe")
        assert session.rows("SELECT count(*) AS n FROM probe") == [{"n": 1}]  # still usable


def test_rows_needing_an_absent_event_type_are_not_asked_for(good_run: Path) -> None:
    with Session.open(good_run) as session:
        assert session.holds("step_end") and not session.holds("cell_reconfigured")
        # the statement would fail if it ran: skipped, it is not planned at all
        missing = "SELECT * FROM no_such_view"
        assert session.rows(missing, label="probe", needs=("cell_reconfigured",)) == []
        assert (
            session.rows(missing, label="probe", needs=("step_end", "engine_weight_checksum")) == []
        )
        steps = "SELECT count(*) AS n FROM step_end"
        assert session.rows(steps, label="probe", needs=("step_end",))[0]["n"] > 0
