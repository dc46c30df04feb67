"""The Markdown report: a table for $GITHUB_STEP_SUMMARY, with run data escaped."""

from __future__ import annotations

import re

from ftaudit.verifier.findings import Location, Report, Severity, Violation
from ftaudit.verifier.render import render
from ftaudit.verifier.render.markdown import escape
from tests.verifier_render.reports import rule


def _table(markdown: str) -> list[list[str]]:
    rows = [line for line in markdown.splitlines() if line.startswith("|")]
    # a cell ends at a pipe that is not escaped, as GitHub's table parser reads it
    return [[c.strip() for c in re.split(r"(?<!\\)\|", row.strip()[1:-1])] for row in rows]


def test_table_with_one_row_per_rule(failing: Report) -> None:
    md = render(failing, "markdown")
    table = _table(md)
    assert table[0] == ["Rule", "Name", "Result", "Checked", "Errors", "Warnings", "Time"]
    assert table[1] == ["---", "---", "---", "---:", "---:", "---:", "---:"]
    assert [row[0] for row in table[2:]] == ["FT001", "FT004", "FT005"]
    assert table[3][2:5] == ["❌ fail", "10", "12"]
    assert table[4][2] == "⚠️ warn"
    assert all(len(row) == 7 for row in table)
    assert md.startswith("## ❌ ft-verify: FAILED: 12 errors, 1 warning in 1 of 3 rules (FT004)")


def test_first_violations_listed_then_counted(failing: Report) -> None:
    md = render(failing, "markdown", max_violations=3)
    assert "### Violations (3 of 13 shown)" in md
    items = [line for line in md.splitlines() if line.startswith("- ")]
    assert len(items) == 3
    assert items[0].startswith(
        r"- **FT004 witness-exactly-once** (error, `missing`) at step 3, attempt 1, cell 0, "
        r"instance pp0\_chunk0.head: 3 samples never reached the weights"
    )
    assert "Ids: 17..19 (samples 1201..1203), 40 (sample 5)." in items[0]
    assert "... and 10 more: FT004 9 errors; FT005 1 warning" in md


def test_passing_report_has_a_green_heading_and_no_violations(passing: Report) -> None:
    md = render(passing, "markdown")
    assert md.startswith("## ✅ ft-verify: verified: all 2 rules hold")
    assert "Violations" not in md


def test_run_data_cannot_break_the_table_or_inject_html() -> None:
    v = Violation(
        "FT006",
        Severity.ERROR,
        "hash | differs\n<script>alert(1)</script> **now**",
        Location(instance="a|b"),
    )
    md = render(Report("/r|x", (rule("FT006", "cross|replica", v),)), "markdown")
    assert all(len(row) == 7 for row in _table(md))
    assert "<script>" not in md and "&lt;script&gt;" in md
    assert r"\*\*now\*\*" in md
    assert escape("a\nb") == "a b"


def test_ids_follow_the_message_as_their_own_sentence() -> None:
    v = Violation("FT004", Severity.ERROR, "their gradient was lost", ids=(8,), sample_indices=(8,))
    md = render(Report("/r", (rule("FT004", "witness-exactly-once", v),)), "markdown")
    assert "their gradient was lost. Ids: 8 (sample 8)." in md
