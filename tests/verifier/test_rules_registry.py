"""The registry is explicit and documented, and docs/rules.md is generated from it."""

from __future__ import annotations

import re
from pathlib import Path

from ftaudit.verifier.findings import Severity
from ftaudit.verifier.rules import RULES
from ftaudit.verifier.rules_doc import render

ROOT = Path(__file__).resolve().parents[2]


def test_codes_are_stable_and_unique() -> None:
    assert [r.code for r in RULES] == [f"FT00{i}" for i in range(1, 8)]
    assert [r.name for r in RULES] == [
        "log-integrity",
        "step-continuity",
        "allocator-replay",
        "witness-exactly-once",
        "sample-exactly-once",
        "checksums",
        "engine-checksums",
    ]


def test_each_rule_documents_its_invariant_with_examples() -> None:
    for rule in RULES:
        doc = type(rule).__doc__ or ""
        assert rule.summary, rule.code
        assert "Fails" in doc and "Passes" in doc, rule.code
        assert isinstance(rule.severity, Severity)
        module = type(rule).__module__.rsplit(".", 1)[-1]
        assert re.fullmatch(rf"{rule.code.lower()}_{rule.name.replace('-', '_')}", module)


def test_rules_page_is_current() -> None:
    page = ROOT / "docs" / "rules.md"
    assert page.read_text() == render(), (
        "docs/rules.md is stale: run `python -m ftaudit.verifier.rules_doc`"
    )
