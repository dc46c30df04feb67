"""One runner for every rule case: build the run in tmp_path, verify with the case's
rule alone, compare the violations with the expected ones.

The cases are found, not listed: every ``ftnnn_cases.py`` in this package, so a rule's
new cases need no edit here, and every registered rule must have a passing and a
failing case.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

from ftaudit.verifier import Violation, verify
from ftaudit.verifier.rules import RULES
from tests.verifier.rules.case import Case, Expect


def _case_modules() -> list[ModuleType]:
    names = sorted(
        m.name
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if re.fullmatch(r"ft\d{3}_cases", m.name)
    )
    return [importlib.import_module(f"{__package__}.{name}") for name in names]


MODULES = _case_modules()
CASES = [(m.RULE, case) for m in MODULES for case in m.CASES]


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


@pytest.mark.parametrize(("rule", "case"), [pytest.param(r, c, id=f"{r}-{c.id}") for r, c in CASES])
def test_rule_case(rule: str, case: Case, tmp_path: Path) -> None:
    report = verify(case.write(tmp_path / "run"), select=[rule])
    (result,) = report.results
    found = list(result.violations)
    shown = "\n".join(f"  {v.location.to_dict()} ids={v.ids} {v.message}" for v in found)
    assert len(found) == len(case.expect), f"expected {len(case.expect)}, got:\n{shown}"
    for expect in case.expect:
        hit = next((v for v in found if _matches(v, expect)), None)
        assert hit is not None, f"no violation like {expect}; got:\n{shown}"
        found.remove(hit)
        assert hit.code == rule


def test_each_rule_has_its_cases_file_with_a_pass_and_a_fail() -> None:
    by_rule = {m.RULE: m for m in MODULES}
    assert sorted(by_rule) == [r.code for r in RULES]
    for rule, module in by_rule.items():
        assert module.__name__.rsplit(".", 1)[-1] == f"{rule.lower()}_cases"
        assert any(not c.expect for c in module.CASES), f"{rule}: no passing case"
        assert any(c.expect for c in module.CASES), f"{rule}: no failing case"


def test_case_ids_are_unique() -> None:
    ids = [f"{r}-{c.id}" for r, c in CASES]
    assert len(ids) == len(set(ids))
