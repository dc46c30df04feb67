"""Hand-built violations and rule results shared by the renderer tests."""

from __future__ import annotations

from ftaudit.verifier.findings import Location, RuleResult, Severity, Violation

MISSING = Violation(
    code="FT004",
    severity=Severity.ERROR,
    message="3 samples never reached the weights: their gradient was lost.",
    location=Location(step=3, attempt=1, cell=0, instance="pp0_chunk0.head"),
    ids=(17, 18, 19, 40),
    sample_indices=(1201, 1202, 1203, 5),
    kind="missing",
)
REPLAYED = Violation(
    code="FT005",
    severity=Severity.WARNING,
    message="step 4 replayed after the restart trained different samples",
    location=Location(step=4, incarnation=1),
    kind="replay_differs",
)


def rule(code: str, name: str, *violations: Violation, checked: int = 10) -> RuleResult:
    return RuleResult(code=code, name=name, checked=checked, violations=violations, seconds=0.012)
