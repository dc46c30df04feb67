"""The JUnit XML report: one testcase per rule, a failure element per failing rule.

CI systems (GitHub, GitLab, Jenkins, Buildkite) show JUnit files as test results, so each
rule appears as a test that passed or failed, with its violations as the failure text.
Warnings that do not fail (no ``--strict``) go to the testcase's ``system-out``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from ftaudit.verifier.findings import Report, RuleResult, Severity, Violation
from ftaudit.verifier.render.describe import (
    MAX_DETAILS,
    ids_text,
    location_text,
    plural,
    rule_status,
    summarize,
)

MAX_LISTED = 200
"""Violations listed per testcase; beyond this the text only counts them (CI UIs choke)."""

SUITE_NAME = "ft-verify"
CLASS_NAME = "ftaudit.verify"

# XML 1.0 forbids most control characters even when escaped.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _clean(text: str) -> str:
    return _NOT_XML.sub("?", text)


def _violation_text(violation: Violation) -> str:
    lines = [f"[{violation.severity.value}] {violation.message}", f"    kind {violation.kind}"]
    where = location_text(violation.location)
    if where:
        lines.append(f"    at {where}")
    ids = ids_text(violation)
    if ids:
        lines.append(f"    ids {ids}")
    lines += [f"    - {detail}" for detail in violation.details[:MAX_DETAILS]]
    return "\n".join(lines)


def _listing(violations: list[Violation]) -> str:
    text = "\n".join(_violation_text(v) for v in violations[:MAX_LISTED])
    if len(violations) > MAX_LISTED:
        text += f"\n... and {len(violations) - MAX_LISTED} more (see the JSON report)"
    return _clean(text)


def _testcase(suite: ET.Element, result: RuleResult, *, strict: bool) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=CLASS_NAME,
        name=_clean(f"{result.code} {result.name}"),
        time=f"{result.seconds:.6f}",
    )
    status = rule_status(result, strict=strict)
    failing = [v for v in result.violations if strict or v.severity is Severity.ERROR]
    passing = [] if strict else [v for v in result.violations if v.severity is Severity.WARNING]
    if status == "fail":
        counts = f"{plural(result.errors, 'error')}, {plural(result.warnings, 'warning')}"
        failure = ET.SubElement(
            case,
            "failure",
            message=_clean(
                f"{result.code}: {counts}; first ({failing[0].kind}): {failing[0].message}"
            ),
            type=result.code,
        )
        failure.text = _listing(failing)
    if passing:
        ET.SubElement(case, "system-out").text = _listing(passing)


def render_junit(report: Report, *, strict: bool = False) -> str:
    """A ``<testsuites>`` document with one ``<testsuite>`` of one ``<testcase>`` per rule."""
    summary = summarize(report, strict=strict)
    seconds = f"{sum(r.seconds for r in report.results):.6f}"
    counts = {
        "tests": str(summary.rules),
        "failures": str(len(summary.failed)),
        "errors": "0",
        "skipped": "0",
        "time": seconds,
    }
    root = ET.Element("testsuites", name="ftaudit", **counts)
    suite = ET.SubElement(root, "testsuite", name=SUITE_NAME, **counts)
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="run_dir", value=_clean(report.run_dir))
    ET.SubElement(properties, "property", name="strict", value=str(strict).lower())
    for result in report.results:
        _testcase(suite, result, strict=strict)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="UTF-8"?>\n{body}\n'
