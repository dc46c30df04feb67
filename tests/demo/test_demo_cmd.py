"""``ftaudit demo``'s command line: everything that is decided before any training starts."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ftaudit.cli.app import app
from ftaudit.demo.bugs import BUGS

runner = CliRunner()


def test_list_bugs_prints_one_name_a_line() -> None:
    result = runner.invoke(app, ["demo", "--list-bugs"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [b.name for b in BUGS]


def test_an_unknown_bug_is_refused_with_the_known_names(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", str(tmp_path / "run"), "--bug", "nope"])
    assert result.exit_code == 2, result.output
    assert "unknown bug 'nope'" in result.stderr and "wrong_shard" in result.stderr
    assert not (tmp_path / "run").exists()


def test_faults_and_no_faults_exclude_each_other(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", str(tmp_path), "--no-faults", "--faults", "[]"])
    assert result.exit_code == 2, result.output
    assert "exclude each other" in result.stderr


def test_a_bad_fault_schedule_is_refused(tmp_path: Path) -> None:
    bad = '[{"step": 1, "mode": "sigkill", "at": "nowhere"}]'
    result = runner.invoke(app, ["demo", str(tmp_path / "run"), "--faults", bad])
    assert result.exit_code == 2, result.output
    assert "bad fault schedule" in result.stderr and "never fires" in result.stderr


def test_a_missing_schedule_file_is_refused(tmp_path: Path) -> None:
    result = runner.invoke(app, ["demo", str(tmp_path / "run"), "--faults", str(tmp_path / "x")])
    assert result.exit_code == 2, result.output
    assert "cannot read the fault schedule" in result.stderr
