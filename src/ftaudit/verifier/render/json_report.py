"""The JSON report: the report's stable ``to_dict()`` plus the verdict, for machines."""

from __future__ import annotations

import json
from typing import Any

from ftaudit.verifier.findings import Report
from ftaudit.verifier.render.describe import summarize

JSON_FORMAT_VERSION = 1
"""Bumped when a key is removed or changes meaning; new keys do not bump it."""


def report_document(report: Report, *, strict: bool = False) -> dict[str, Any]:
    """The JSON document as a dict: verdict and counts first, then every rule's violations."""
    summary = summarize(report, strict=strict)
    body = report.to_dict()
    return {
        "format_version": JSON_FORMAT_VERSION,
        "run_dir": body["run_dir"],
        "passed": summary.passed,
        "strict": strict,
        "errors": summary.errors,
        "warnings": summary.warnings,
        "failed_rules": list(summary.failed),
        "results": body["results"],
    }


def render_json(report: Report, *, strict: bool = False) -> str:
    """Every violation, none truncated; strict JSON (no NaN), one trailing newline."""
    return json.dumps(report_document(report, strict=strict), indent=2, allow_nan=False) + "\n"
