"""The JUnit report parses as XML: one testcase per rule, failures for violated rules."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ftaudit.verifier.findings import Report, Severity, Violation
from ftaudit.verifier.render import render
from ftaudit.verifier.render.junit import MAX_LISTED
from tests.verifier_render.reports import rule


def _suite(report: Report, *, strict: bool = False) -> ET.Element:
    root = ET.fromstring(render(report, "junit", strict=strict).encode())
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    return suites[0]


def test_one_testcase_per_rule_and_a_failure_per_violated_rule(failing: Report) -> None:
    suite = _suite(failing)
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "FT001 log-integrity",
        "FT004 witness-exactly-once",
        "FT005 sample-exactly-once",
    ]
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None and failure.get("type") == "FT004"
    assert "12 errors" in (failure.get("message") or "")
    assert (failure.text or "").count("[error] 3 samples never reached the weights") == 12
    assert "ids 17..19 (samples 1201..1203), 40 (sample 5)" in (failure.text or "")


def test_warnings_are_output_unless_strict(failing: Report) -> None:
    lenient = _suite(failing).findall("testcase")[2]
    assert lenient.find("failure") is None
    assert "[warning] step 4 replayed" in (lenient.findtext("system-out") or "")
    strict = _suite(failing, strict=True)
    assert strict.get("failures") == "2"
    assert strict.findall("testcase")[2].find("failure") is not None


def test_passing_report_has_no_failures(passing: Report) -> None:
    suite = _suite(passing)
    assert suite.get("failures") == "0"
    assert all(c.find("failure") is None for c in suite.findall("testcase"))


def test_control_characters_and_markup_in_messages_stay_valid_xml() -> None:
    v = Violation("FT001", Severity.ERROR, "bad\x00file <seg> & \x1b[31m")
    suite = _suite(Report("/r", (rule("FT001", "log-integrity", v),)))
    text = suite.find("testcase/failure").text or ""  # type: ignore[union-attr]
    assert "bad?file <seg> & ?[31m" in text


def test_long_failure_listings_are_cut() -> None:
    v = Violation("FT004", Severity.ERROR, "missing")
    suite = _suite(Report("/r", (rule("FT004", "w", *([v] * (MAX_LISTED + 5))),)))
    text = suite.find("testcase/failure").text or ""  # type: ignore[union-attr]
    assert text.count("[error] missing") == MAX_LISTED
    assert text.endswith("... and 5 more (see the JSON report)")
