"""What every rule is: a stable code, a name, a default severity and a check."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from ftaudit.verifier.findings import Location, Severity, Violation

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext

MAX_IDS = 200
"""A violation lists at most this many ids; ``id_count`` says how many there were."""


def name_list(names: Sequence[str | None], limit: int = 8) -> str:
    """``[a, b, ... N more]``: the first ``limit`` names of a violation's message.

    A damaged segment can decode a tensor name as NULL: it is shown, not a crash.
    """
    shown = ["<unnamed>" if n is None else n for n in names[:limit]]
    more = f", ... {len(names) - limit} more" if len(names) > limit else ""
    return "[" + ", ".join(shown) + more + "]"


def order_severity(ctx: RunContext) -> Severity:
    """How hard a finding weighs that a reproducible data order would rule out.

    A hole in the committed sample stream, a replayed step that trained other samples,
    an epoch order that changed at a resume, one position fed other content by another
    incarnation: each is a defect where the run declares its order deterministic
    (``deterministic_order=True``) and can be legitimate where it does not. So they are
    errors under True and warnings otherwise: False (declared non-deterministic) and
    None (undeclared) read the same, in every rule.
    """
    return Severity.ERROR if ctx.deterministic_order is True else Severity.WARNING


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule found: how many things it looked at, and what was wrong."""

    checked: int
    violations: tuple[Violation, ...] = ()
    note: str = ""
    """What the check could and could not look at (e.g. FT008 without a manifest)."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """Named tallies a reader should see besides the violations (e.g. excused samples)."""


class Rule(ABC):
    """One invariant of SPEC §6. Subclasses set ``code``, ``name``, ``severity``, ``check``.

    The class docstring is the rule's documentation: its first line is the invariant,
    its body shows a failing and a passing event sequence (``docs/rules.md`` is built
    from it).
    """

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.ERROR
    kinds: ClassVar[dict[str, str]] = {}
    """Every ``kind`` this rule reports, with what it means (stable: never renamed)."""

    @abstractmethod
    def check(self, ctx: RunContext) -> RuleOutcome:
        """Look at the run and return the violations of this rule."""

    def violation(
        self,
        message: str,
        *,
        kind: str,
        location: Location | None = None,
        ids: Sequence[int] = (),
        sample_indices: Sequence[int] = (),
        id_count: int | None = None,
        severity: Severity | None = None,
        details: Sequence[str] = (),
        shown_at: int | None = None,
    ) -> Violation:
        """A violation of this rule; id lists are cut to :data:`MAX_IDS`.

        ``kind`` must be one of the rule's :attr:`kinds`, so every kind a tool can see is
        declared (and documented) in one place.
        """
        if kind not in self.kinds:
            raise ValueError(f"{self.code} reports kind {kind!r} but does not declare it")
        count = id_count if id_count is not None else len(ids) or len(sample_indices)
        return Violation(
            code=self.code,
            severity=severity or self.severity,
            message=message,
            kind=kind,
            details=tuple(details),
            location=location or Location(),
            ids=tuple(int(i) for i in ids[:MAX_IDS]),
            sample_indices=tuple(int(i) for i in sample_indices[:MAX_IDS]),
            id_count=count if ids or sample_indices else None,
            shown_at=shown_at,
        )

    @property
    def summary(self) -> str:
        """The invariant: the first line of the docstring."""
        return (self.__doc__ or "").strip().splitlines()[0]

    def __repr__(self) -> str:
        return f"<{self.code} {self.name}>"
