"""The SQL sandbox has no hole: not DuckDB's temp directory, not a default that opens files.

DuckDB keeps its temp directory (``<cwd>/.tmp``) usable after ``enable_external_access =
false``; with that folder present, ``COPY``, ``read_csv``, ``glob`` and ``ATTACH`` used to
reach it from ``ftaudit sql`` and from ``ftaudit.connect``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import ftaudit
from tests.support.cli import Invoke, check_exit

ATTACKS = {
    "copy-to": "COPY (SELECT * FROM events) TO '.tmp/leak.csv'",
    "copy-to-absolute": "COPY (SELECT 1 AS x) TO '{tmp}/leak.csv'",
    "read-csv": "SELECT * FROM read_csv('.tmp/secret.csv')",
    "read-text": "SELECT * FROM read_text('.tmp/secret.csv')",
    "glob": "SELECT * FROM glob('.tmp/*')",
    "attach": "ATTACH '.tmp/other.duckdb' AS other",
    "unlock-temp": "SET temp_directory = '.tmp'",
}


@pytest.fixture
def cwd_with_temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory holding DuckDB's default temp folder, with a file in it."""
    tmp = tmp_path / ".tmp"
    tmp.mkdir()
    (tmp / "secret.csv").write_text("user,password\nroot,hunter2\n")
    monkeypatch.chdir(tmp_path)
    return tmp


def _untouched(tmp: Path) -> None:
    assert sorted(p.name for p in tmp.iterdir()) == ["secret.csv"]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_sql_command_refuses_the_temp_folder(
    ftaudit: Invoke, good_run: Path, cwd_with_temp_folder: Path, attack: str
) -> None:
    result = ftaudit("sql", good_run, ATTACKS[attack].format(tmp=cwd_with_temp_folder))
    check_exit(result, 3)
    assert result.stderr.startswith("error: query failed: "), result.stderr
    assert "secret" not in result.stdout and "hunter2" not in result.stdout
    _untouched(cwd_with_temp_folder)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_connect_is_sandboxed_by_default(
    good_run: Path, cwd_with_temp_folder: Path, attack: str
) -> None:
    with ftaudit.connect(good_run) as con:
        with pytest.raises(duckdb.Error, match=r"disabled by configuration|locked"):
            con.execute(ATTACKS[attack].format(tmp=cwd_with_temp_folder)).fetchall()
        assert con.execute("SELECT count(*) FROM step_end").fetchone() == (4,)
    _untouched(cwd_with_temp_folder)


def test_file_access_is_an_explicit_opt_out(good_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "steps.csv"
    with ftaudit.connect(good_run, sandbox=False) as con:
        con.execute(f"COPY (SELECT step FROM step_end ORDER BY step) TO '{out}'")
    assert out.read_text().split() == ["step", "0", "1", "2", "3"]


def test_big_queries_still_run_without_a_temp_folder(good_run: Path) -> None:
    with ftaudit.connect(good_run) as con:
        rows = con.execute(
            "SELECT count(*) FROM (SELECT range % 1000 AS k, count(*) FROM range(2000000) "
            "GROUP BY k)"
        ).fetchone()
    assert rows == (1000,)
