"""What the verifier reports: violations with where and why, per-rule results, the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True)
class Location:
    """Where a violation happens; every field is optional."""

    step: int | None = None
    attempt: int | None = None
    incarnation: int | None = None
    cell: int | None = None
    rank: int | None = None
    instance: str | None = None
    writer: str | None = None
    segment: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Violation:
    """One broken invariant, in words a person can act on."""

    code: str
    """The rule's stable code, e.g. ``FT004``."""
    severity: Severity
    message: str
    location: Location = field(default_factory=Location)
    ids: tuple[int, ...] = ()
    """Offending witness ids (or other ids the rule names), at most a few hundred."""
    sample_indices: tuple[int, ...] = ()
    """The sample indices of ``ids`` where known."""
    id_count: int | None = None
    """How many ids (or, without ids, sample indices) were involved: the lists are cut."""
    details: tuple[str, ...] = ()
    """The per-step findings a root-cause violation groups under its headline."""
    kind: str = "unspecified"
    """What broke, as a stable machine-readable word of the rule's ``kinds`` (``missing``,
    ``extra``, ``hole``...); documented in ``docs/cli.md``. Tools switch on it, never on
    the message."""
    shown_at: int | None = None
    """The step of its latest evidence, where that is later than :attr:`location`'s (one
    content trained again steps later): a check of the steps from ``since`` on reports it
    when this step is one of them, not only when its location is."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.severity.value,
            "kind": self.kind,
            "message": self.message,
            "location": self.location.to_dict(),
        }
        if self.ids:
            out["ids"] = list(self.ids)
            out["id_count"] = self.id_count if self.id_count is not None else len(self.ids)
        if self.details:
            out["details"] = list(self.details)
        if self.sample_indices:
            out["sample_indices"] = list(self.sample_indices)
            out["sample_count"] = (
                self.id_count if self.id_count is not None else len(self.sample_indices)
            )
        return out


@dataclass(frozen=True)
class RuleResult:
    code: str
    name: str
    checked: int
    """How many things the rule looked at (steps, snapshots, allocations...)."""
    violations: tuple[Violation, ...]
    seconds: float = 0.0
    note: str = ""
    """What the rule could not check, in words (empty when it checked everything)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Named tallies besides the violations, e.g. FT004's ``excused_zero_advantage``."""

    @property
    def errors(self) -> int:
        return sum(v.severity is Severity.ERROR for v in self.violations)

    @property
    def warnings(self) -> int:
        return sum(v.severity is Severity.WARNING for v in self.violations)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "checked": self.checked,
            "errors": self.errors,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 6),
            "counts": dict(self.counts),
            "violations": [v.to_dict() for v in self.violations],
            **({"note": self.note} if self.note else {}),
        }


@dataclass(frozen=True)
class Report:
    run_dir: str
    results: tuple[RuleResult, ...]

    def passed(self, *, strict: bool = False) -> bool:
        """True when no rule has an error (with ``strict``: no warning either)."""
        return all(r.errors == 0 and (not strict or r.warnings == 0) for r in self.results)

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "results": [r.to_dict() for r in self.results]}
