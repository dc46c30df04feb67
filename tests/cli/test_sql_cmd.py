"""``ftaudit sql``: views listing, formats, and a sandbox that no query can leave."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.support.cli import Invoke, check_exit


def test_no_query_lists_views_and_columns(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("sql", good_run, "--format", "csv")
    check_exit(result, 0)
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    columns = {(r["view"], r["column"]) for r in rows}
    for view in ("events", "metrics", "witness_snapshot", "step_end", "checkpoints"):
        assert (view, "step" if view != "checkpoints" else "iteration") in columns, view
    assert ("witness_snapshot", "nonzero_ids") in columns
    assert not any(r["view"].startswith("_") for r in rows)  # internal tables stay hidden


def test_view_listing_as_a_table_names_each_view_once(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("sql", good_run)
    check_exit(result, 0)
    first_cells = [line.split()[0] for line in result.stdout.splitlines()[2:] if line.strip()]
    assert first_cells.count("witness_snapshot") == 1
    assert "rows)" in result.stderr


def test_query_as_table(ftaudit: Invoke, good_run: Path) -> None:
    query = "SELECT step, count(*) AS snapshots FROM witness_snapshot GROUP BY step ORDER BY step"
    result = ftaudit("sql", good_run, query)
    check_exit(result, 0)
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["step", "snapshots"]
    assert [line.split() for line in lines[2:]] == [[str(s), "4"] for s in range(4)]
    assert result.stderr == "(4 rows)\n"


def test_query_as_json_keeps_nested_values(ftaudit: Invoke, good_run: Path) -> None:
    query = "SELECT step, cells FROM step_end ORDER BY step LIMIT 1"
    result = ftaudit("sql", good_run, query, "--format", "json")
    check_exit(result, 0)
    [row] = json.loads(result.stdout)
    assert row["step"] == 0
    assert row["cells"] == {
        "0": {"errored": False, "ranks": ["normal"]},
        "1": {"errored": False, "ranks": ["normal"]},
    }


def test_query_as_csv(ftaudit: Invoke, good_run: Path) -> None:
    query = "SELECT DISTINCT instance FROM witness_snapshot ORDER BY 1"
    result = ftaudit("sql", good_run, query, "--format", "csv")
    check_exit(result, 0)
    assert result.stdout == "instance\npp0_chunk0.head\npp0_chunk0.tail\n"


def test_scratch_work_in_memory_is_allowed(ftaudit: Invoke, good_run: Path) -> None:
    query = "CREATE TEMP TABLE scratch AS SELECT 41 AS x; SELECT x + 1 AS answer FROM scratch"
    result = ftaudit("sql", good_run, query, "--format", "csv")
    check_exit(result, 0)
    assert result.stdout == "answer\n42\n"  # the last statement's rows


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("COPY (SELECT * FROM events) TO '{out}'", "file system operations are disabled"),
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("ATTACH '{out}' AS other", "file system operations are disabled"),
        ("SET enable_external_access = true", "configuration has been locked"),
        ("SELECT * FROM read_parquet('{run}/events/*/*.parquet')", "disabled"),
    ],
    ids=["copy-to", "read-csv", "attach", "unlock", "read-segments-directly"],
)
def test_sandbox_refuses_file_access_with_exit_3(
    ftaudit: Invoke, good_run: Path, tmp_path: Path, query: str, why: str
) -> None:
    out = tmp_path / "leak.out"
    result = ftaudit("sql", good_run, query.format(out=out, run=good_run))
    check_exit(result, 3)
    assert result.stderr.startswith("error: query failed: ")
    assert why in result.stderr
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""
    assert not out.exists()


def test_bad_sql_is_exit_3_in_one_line(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("sql", good_run, "SELEC * FROM events")
    check_exit(result, 3)
    assert result.stderr.startswith("error: query failed: Parser Error")
    assert result.stderr.count("\n") == 1


def test_unusable_run_is_exit_2(ftaudit: Invoke, tmp_path: Path) -> None:
    result = ftaudit("sql", tmp_path / "missing", "SELECT 1")
    check_exit(result, 2)
    assert result.stderr == f"error: {tmp_path / 'missing'}: no such run directory\n"


def test_sql_does_not_import_the_verifier_renderers(good_run: Path) -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from ftaudit.cli.app import app\n"
        f"r = CliRunner().invoke(app, ['sql', {str(good_run)!r}, 'SELECT count(*) FROM events'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.startswith('ftaudit.verifier.render')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
