"""A run directory's name is a name, never a pattern: every rule reads that run's files.

``ft-verify 'g[1]'`` used to read the rows of a sibling run ``g1`` (DuckDB globbed the
path), so a failing run verified when a clean copy sat next to it; ``**`` read every
sibling. Each name below holds a failing run (one sample lost at step 2) beside a clean
copy of it whose folder name the path would match as a glob.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftaudit import connect
from ftaudit.verifier import Report, verify
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import segments

NAMES = {  # run name -> the sibling its glob would match
    "brackets": ("g[1]", "g1"),
    "negated-class": ("g[!x]", "gy"),
    "star": ("g*", "gz"),
    "question-mark": ("g?", "gq"),
    "braces": ("g{a,b}", "ga"),
    "double-star": ("**", "sibling"),
    "tilde": ("~", "home"),
    "dollar": ("$HOME", "home"),
    "space": ("g 1", "g1"),
    "single-quote": ("g'1", "g1"),
    "double-quote": ('g"1', "g1"),
    "backslash": ("g\\1", "g1"),
}

NONZERO = "witness_snapshot.nonzero_ids"


def _heal(run: Path) -> None:
    """Make a copy of the failing run clean: restore the sample its cell-0 head lost."""
    for seg in segments(run):
        table = pq.read_table(seg)
        if NONZERO not in table.column_names:
            continue
        rows = table.to_pylist()
        tails = {
            (r["step"], r["witness_snapshot.cell"]): r[NONZERO]
            for r in rows
            if r["type"] == "witness_snapshot" and r["witness_snapshot.instance"].endswith("tail")
        }
        for r in rows:
            if r["type"] == "witness_snapshot":
                r[NONZERO] = tails[(r["step"], r["witness_snapshot.cell"])]
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), seg)


def _failing(report: Report) -> list[str]:
    return [r.code for r in report.results if r.violations]


@pytest.fixture(scope="module")
def clean_copy(tmp_path_factory: pytest.TempPathFactory, bad_run: Path) -> Path:
    healed = tmp_path_factory.mktemp("healed") / "run"
    shutil.copytree(bad_run, healed)
    _heal(healed)
    # its rows are clean (only FT001 sees that the files were rewritten): read by mistake,
    # they would hide the lost sample
    assert _failing(verify(healed)) == ["FT001"]
    return healed


FAST = {"brackets", "double-star"}
"""The fast suite tries these two; the slow suite every name."""


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=() if c in FAST else pytest.mark.slow) for c in sorted(NAMES)]
)
def test_a_run_name_is_never_a_glob(
    ftaudit: Invoke, bad_run: Path, clean_copy: Path, tmp_path: Path, case: str
) -> None:
    name, decoy = NAMES[case]
    run = tmp_path / name
    shutil.copytree(bad_run, run)
    shutil.copytree(clean_copy, tmp_path / decoy)
    assert _failing(verify(run)) == ["FT004"]
    with connect(run) as con:
        files = {row[0] for row in con.execute("SELECT DISTINCT segment FROM events").fetchall()}
    assert files == {str(p) for p in segments(run)}
    result = ftaudit("sql", run, "SELECT count(DISTINCT segment) AS n FROM events", "-f", "csv")
    check_exit(result, 0)
    assert result.stdout == f"n\n{len(segments(run))}\n"


def test_the_real_entry_point_fails_the_bracketed_run(
    bad_run: Path, clean_copy: Path, tmp_path: Path
) -> None:
    shutil.copytree(bad_run, tmp_path / "g[1]")
    shutil.copytree(clean_copy, tmp_path / "g1")
    ft_verify = Path(sys.executable).with_name("ft-verify")
    done = subprocess.run(
        [str(ft_verify), "g[1]"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done
    assert "FT004" in done.stdout and "Traceback" not in done.stderr
