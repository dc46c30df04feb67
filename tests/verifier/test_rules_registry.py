"""The registry is explicit and documented, and docs/rules.md is generated from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ftaudit.verifier.findings import Severity
from ftaudit.verifier.rules import RULES
from ftaudit.verifier.rules_doc import kinds_table, render, with_kinds_table

ROOT = Path(__file__).resolve().parents[2]


def test_codes_are_stable_and_unique() -> None:
    codes = [r.code for r in RULES]
    assert codes == sorted(set(codes)), "codes are unique and in registry order"
    names = {r.code: r.name for r in RULES}
    assert {k: names.get(k) for k in STABLE} == STABLE  # a code never changes its meaning


STABLE = {
    "FT001": "log-integrity",
    "FT002": "step-continuity",
    "FT003": "allocator-replay",
    "FT004": "witness-exactly-once",
    "FT005": "sample-exactly-once",
    "FT006": "checksums",
    "FT007": "engine-checksums",
    "FT008": "data-identity",
    "FT009": "restore-evidence",
    "FT010": "checkpoint-state",
    "FT011": "application-count",
    "FT012": "parameter-manifest",
}


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


def test_every_rule_declares_stable_kinds_documented_in_cli_md() -> None:
    for rule in RULES:
        assert rule.kinds, f"{rule.code} declares no violation kinds"
        for kind, meaning in rule.kinds.items():
            assert re.fullmatch(r"[a-z][a-z_]*", kind), (rule.code, kind)
            assert meaning and not meaning.endswith("."), (rule.code, kind)
    cli = (ROOT / "docs" / "cli.md").read_text()
    assert with_kinds_table(cli) == cli, (
        "the kinds table of docs/cli.md is stale: run `python -m ftaudit.verifier.rules_doc`"
    )
    assert kinds_table() in cli


def test_a_violation_of_an_undeclared_kind_is_refused() -> None:
    rule = RULES[3]
    assert rule.violation("m", kind="missing").kind == "missing"
    with pytest.raises(ValueError, match="does not declare"):
        rule.violation("m", kind="no_such_kind")
