"""One runner for every rule case: build the run in tmp_path, verify, compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.verifier import Violation, verify
from tests.support.builder import RunBuilder
from tests.verifier import (
    cases_evidence,
    cases_false_alarms,
    cases_ft004,
    cases_ft008,
    cases_other,
)
from tests.verifier.cases import Case, Expect

ALL_CASES: tuple[Case, ...] = (
    *cases_ft004.CASES,
    *cases_other.CASES,
    *cases_false_alarms.CASES,
    *cases_ft008.CASES,
    *cases_evidence.CASES,
)


def _matches(v: Violation, e: Expect) -> bool:
    loc = v.location
    checks = [
        e.ids is None or v.ids == e.ids,
        e.samples is None or v.sample_indices == e.samples,
        e.step is None or loc.step == e.step,
        e.attempt is None or loc.attempt == e.attempt,
        e.cell is None or loc.cell == e.cell,
        e.instance is None or loc.instance == e.instance,
        v.severity.value == e.severity,
        e.kind is None or v.kind == e.kind,
        e.text is None or e.text in v.message,
    ]
    return all(checks)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: f"{c.rule}-{c.name}")
def test_rule_case(case: Case, tmp_path: Path) -> None:
    builder = RunBuilder(tmp_path / "run", B=case.B, cells=case.cells)
    try:
        case.build(builder)
    finally:
        builder.close()
    report = verify(builder.root, select=[case.rule])
    (result,) = report.results
    found = list(result.violations)
    shown = "\n".join(f"  {v.location.to_dict()} ids={v.ids} {v.message}" for v in found)
    assert len(found) == len(case.expect), f"expected {len(case.expect)}, got:\n{shown}"
    for expect in case.expect:
        hit = next((v for v in found if _matches(v, expect)), None)
        assert hit is not None, f"no violation like {expect}; got:\n{shown}"
        found.remove(hit)
        assert hit.code == case.rule
