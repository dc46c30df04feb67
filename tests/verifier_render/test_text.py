"""The terminal report: rules table, violations in full, counts, verdict, colour rules."""

from __future__ import annotations

from ftaudit.verifier.findings import Location, Report, Severity, Violation
from ftaudit.verifier.render import render
from tests.verifier_render.reports import rule


def test_table_has_one_row_per_rule_with_counts(failing: Report) -> None:
    text = render(failing, "text")
    header = next(line for line in text.splitlines() if line.startswith("rule"))
    assert header.split() == ["rule", "name", "result", "checked", "errors", "warnings", "time"]
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line[:2] == "FT"}
    assert rows["FT001"][1:5] == ["log-integrity", "pass", "10", "0"]
    assert rows["FT004"][1:6] == ["witness-exactly-once", "fail", "10", "12", "0"]
    assert rows["FT005"][1:6] == ["sample-exactly-once", "warn", "10", "0", "1"]


def test_first_violations_in_full_then_counts(failing: Report) -> None:
    text = render(failing, "text", max_violations=2)
    assert "Violations (first 2 of 13)" in text
    assert "1. FT004 witness-exactly-once · error" in text
    assert "step 3, attempt 1, cell 0, instance pp0_chunk0.head" in text
    assert "ids 17..19 (samples 1201..1203), 40 (sample 5)" in text
    assert "3 samples never reached the weights" in text
    assert "3. FT004" not in text
    assert "... and 11 more: FT004 10 errors; FT005 1 warning" in text
    assert text.rstrip().endswith("FAILED: 12 errors, 1 warning in 1 of 3 rules (FT004)")


def test_passing_report_says_verified_and_lists_no_violations(passing: Report) -> None:
    text = render(passing, "text")
    assert "Violation" not in text
    assert text.rstrip().endswith("verified: all 2 rules hold")


def test_no_escape_codes_without_color_and_some_with(failing: Report) -> None:
    assert "\x1b[" not in render(failing, "text", color=False)
    assert "\x1b[" in render(failing, "text", color=True)


def test_messages_are_shown_literally_not_as_markup() -> None:
    v = Violation("FT007", Severity.ERROR, "engine [bold]2[/bold] differs", Location(step=1))
    text = render(Report("/r", (rule("FT007", "engine-checksums", v),)), "text")
    assert "engine [bold]2[/bold] differs" in text


def test_long_messages_are_not_cut(failing: Report) -> None:
    long = "x" * 300
    v = Violation("FT004", Severity.ERROR, long)
    text = render(Report("/r", (rule("FT004", "w", v),)), "text", width=60)
    assert long in text


def test_a_root_cause_lists_its_grouped_details_in_every_format() -> None:
    v = Violation(
        "FT005",
        Severity.ERROR,
        "the resumed data stream of incarnation 1 starts at sample 0, not at 16",
        Location(step=4, incarnation=1),
        details=tuple(f"step {s} replayed" for s in range(10)),
        kind="resumed_stream_replays",
    )
    report = Report("/r", (rule("FT005", "sample-exactly-once", v),))
    text = render(report, "text")
    assert "FT005 sample-exactly-once · error · resumed_stream_replays" in text
    assert "  - step 0 replayed" in text and "... and 2 more" in text
    assert "step 9 replayed" not in text
    assert "  - step 7 replayed" in render(report, "markdown")
    assert "    - step 7 replayed" in render(report, "junit")
    assert '"details": [' in render(report, "json")
