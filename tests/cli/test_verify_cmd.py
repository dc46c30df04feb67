"""``ftaudit verify`` / ``ft-verify`` on real run directories: exit codes, formats, -o, rules."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import leave_torn_flush


def test_clean_run_verifies_with_exit_0(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("verify", good_run)
    check_exit(result, 0)
    assert "verified: all" in result.stdout
    assert "FT004" in result.stdout  # the rules table lists the witness rule
    assert result.stderr == ""  # no talk when the report itself goes to the terminal
    assert "\x1b[" not in result.stdout  # NO_COLOR (set for every test) and not a tty


def test_missing_sample_fails_with_exit_1_and_names_it(ftaudit: Invoke, bad_run: Path) -> None:
    result = ftaudit("verify", bad_run)
    check_exit(result, 1)
    out = result.stdout
    assert "FAILED" in out
    assert "FT004" in out
    assert "step 2" in out and "cell 0" in out and "pp0_chunk0.head" in out
    assert "ids 8 (sample 8)" in out  # the dropped id and the sample it carried


def test_json_report_on_stdout_and_verdict_on_stderr(ftaudit: Invoke, bad_run: Path) -> None:
    result = ftaudit("verify", bad_run, "--format", "json")
    check_exit(result, 1)
    doc = json.loads(result.stdout)
    assert doc["passed"] is False and "FT004" in doc["failed_rules"]
    assert result.stderr.startswith("ft-verify: FAILED")


def test_junit_to_file(ftaudit: Invoke, bad_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "ft-verify.xml"
    result = ftaudit("verify", bad_run, "--format", "junit", "-o", target)
    check_exit(result, 1)
    assert result.stdout == ""
    assert f"junit report in {target}" in result.stderr
    suite = ET.parse(target).getroot().find("testsuite")
    assert suite is not None
    failed = [c.get("name") for c in suite.findall("testcase") if c.find("failure") is not None]
    assert [name.split()[0] for name in failed if name] == ["FT004"]


def test_markdown_summary(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("verify", good_run, "--format", "markdown")
    check_exit(result, 0)
    assert result.stdout.startswith("## ✅ ft-verify: verified")
    assert "| Rule | Name | Result |" in result.stdout


def test_rule_selects_and_skip_rule_drops(ftaudit: Invoke, bad_run: Path) -> None:
    only = ftaudit("verify", bad_run, "--rule", "FT001", "--format", "json")
    check_exit(only, 0)
    assert [r["code"] for r in json.loads(only.stdout)["results"]] == ["FT001"]
    skipped = ftaudit("verify", bad_run, "--skip-rule", "ft004", "--format", "json")
    codes = [r["code"] for r in json.loads(skipped.stdout)["results"]]
    assert "FT004" not in codes and "FT001" in codes
    check_exit(skipped, 0)


def test_rule_by_name(ftaudit: Invoke, bad_run: Path) -> None:
    result = ftaudit("verify", bad_run, "--rule", "witness-exactly-once", "--format", "json")
    check_exit(result, 1)
    assert [r["code"] for r in json.loads(result.stdout)["results"]] == ["FT004"]


def test_unknown_rule_is_exit_2_in_one_line(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("verify", good_run, "--rule", "FT999")
    check_exit(result, 2)
    assert result.stderr.startswith("error: unknown rule 'FT999'; known rules: FT001")
    assert result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_unwritable_output_is_exit_2(ftaudit: Invoke, good_run: Path, tmp_path: Path) -> None:
    result = ftaudit("verify", good_run, "-o", tmp_path / "no" / "such" / "dir.xml")
    check_exit(result, 2)
    assert result.stderr.startswith("error: cannot write ")
    assert result.stderr.count("\n") == 1


def test_bad_format_is_a_usage_error_exit_2(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("verify", good_run, "--format", "yaml")
    check_exit(result, 2)
    assert "yaml" in result.stderr and result.stdout == ""


def test_warnings_fail_only_with_strict(ftaudit: Invoke, fresh_run: Path) -> None:
    leave_torn_flush(fresh_run)  # FT001 warns: a flush was cut short, its events lost
    lenient = ftaudit("verify", fresh_run)
    check_exit(lenient, 0)
    assert "warn" in lenient.stdout and "1 warning" in lenient.stdout
    strict = ftaudit("verify", fresh_run, "--strict")
    check_exit(strict, 1)
    assert "FAILED (strict)" in strict.stdout
