"""The JSON report: the stable to_dict() plus the verdict, every violation listed."""

from __future__ import annotations

import json

from ftaudit.verifier.findings import Report
from ftaudit.verifier.render import render


def test_json_holds_verdict_and_every_violation(failing: Report) -> None:
    doc = json.loads(render(failing, "json", max_violations=1))
    assert doc["passed"] is False
    assert doc["errors"] == 12 and doc["warnings"] == 1
    assert doc["failed_rules"] == ["FT004"]
    assert [r["code"] for r in doc["results"]] == ["FT001", "FT004", "FT005"]
    ft004 = doc["results"][1]
    assert len(ft004["violations"]) == 12  # never truncated, unlike text
    first = ft004["violations"][0]
    assert first["location"] == {"step": 3, "attempt": 1, "cell": 0, "instance": "pp0_chunk0.head"}
    assert first["ids"] == [17, 18, 19, 40]
    assert first["sample_indices"] == [1201, 1202, 1203, 5]


def test_strict_turns_warnings_into_failure(warning_only: Report) -> None:
    assert json.loads(render(warning_only, "json"))["passed"] is True
    strict = json.loads(render(warning_only, "json", strict=True))
    assert strict["passed"] is False and strict["strict"] is True
    assert strict["failed_rules"] == ["FT005"]


def test_json_results_equal_the_report_dict(passing: Report) -> None:
    assert json.loads(render(passing, "json"))["results"] == passing.to_dict()["results"]
