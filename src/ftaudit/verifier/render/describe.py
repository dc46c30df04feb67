"""Wording shared by the renderers: headline, rule status, locations, ids with their samples.

Kept in one place so that the terminal, Markdown and JUnit reports say the same thing in
the same words, and a test of the wording covers every format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ftaudit.verifier.findings import Location, Report, RuleResult, Severity, Violation

MAX_ID_GROUPS = 8
"""How many runs of ids a violation shows before it only counts the rest."""

MAX_DETAILS = 8
"""How many grouped per-step details of a root-cause violation a report shows."""


def plural(n: int, word: str) -> str:
    """``1 error``, ``3 errors``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def seconds_text(seconds: float) -> str:
    """A rule's run time, short: ``0.4 ms``, ``12 ms``, ``3.2 s``."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def rule_status(result: RuleResult, *, strict: bool) -> str:
    """``pass``, ``warn`` (warnings only, not strict) or ``fail``."""
    if result.errors or (strict and result.warnings):
        return "fail"
    return "warn" if result.warnings else "pass"


@dataclass(frozen=True)
class Summary:
    """The verdict of a report, counted once for every renderer."""

    rules: int
    failed: tuple[str, ...]
    """Codes of the rules that fail (with ``strict``: warnings fail too)."""
    errors: int
    warnings: int
    strict: bool

    @property
    def passed(self) -> bool:
        return not self.failed

    def headline(self) -> str:
        """One line a person reads first: the verdict and the counts behind it."""
        if self.rules == 0:
            return "nothing verified: no rule was selected"
        if self.passed:
            text = f"verified: all {plural(self.rules, 'rule')} hold"
            return text + (f" ({plural(self.warnings, 'warning')})" if self.warnings else "")
        mode = " (strict)" if self.strict else ""
        counts = f"{plural(self.errors, 'error')}, {plural(self.warnings, 'warning')}"
        return (
            f"FAILED{mode}: {counts} in {len(self.failed)} of {plural(self.rules, 'rule')} "
            f"({', '.join(self.failed)})"
        )


def summarize(report: Report, *, strict: bool) -> Summary:
    return Summary(
        rules=len(report.results),
        failed=tuple(r.code for r in report.results if rule_status(r, strict=strict) == "fail"),
        errors=sum(r.errors for r in report.results),
        warnings=sum(r.warnings for r in report.results),
        strict=strict,
    )


_LOCATION_FIELDS: tuple[str, ...] = (
    "step",
    "attempt",
    "incarnation",
    "cell",
    "rank",
    "instance",
    "writer",
    "segment",
)


def location_text(location: Location) -> str:
    """``step 3, attempt 1, cell 0, instance pp0_chunk0.head``; empty when nothing is known."""
    parts = []
    for name in _LOCATION_FIELDS:
        value = getattr(location, name)
        if value is not None:
            parts.append(f"{name} {value}")
    return ", ".join(parts)


def _runs(values: Sequence[int]) -> list[tuple[int, int]]:
    """``(start index, length)`` of each run of consecutive values."""
    runs: list[tuple[int, int]] = []
    for i, value in enumerate(values):
        if runs and value == values[i - 1] + 1:
            start, length = runs[-1]
            runs[-1] = (start, length + 1)
        else:
            runs.append((i, 1))
    return runs


def _span(first: int, length: int) -> str:
    return str(first) if length == 1 else f"{first}..{first + length - 1}"


def id_groups(ids: Sequence[int], samples: Sequence[int]) -> list[str]:
    """Ids as runs, each with its samples: ``17..19 (samples 1201..1203)``.

    A run breaks where either the id or the sample index stops counting up by one, so
    every group states exactly which sample each id belongs to. Without (matching) sample
    indices, only the ids are grouped.
    """
    if len(samples) != len(ids):
        return [_span(ids[s], n) for s, n in _runs(ids)]
    pairs = list(zip(ids, samples, strict=True))
    groups: list[str] = []
    start = 0
    for i in range(1, len(pairs) + 1):
        if i < len(pairs) and pairs[i] == (pairs[i - 1][0] + 1, pairs[i - 1][1] + 1):
            continue
        n = i - start
        word = "sample" if n == 1 else "samples"
        groups.append(f"{_span(pairs[start][0], n)} ({word} {_span(pairs[start][1], n)})")
        start = i
    return groups


def ids_text(violation: Violation, *, max_groups: int = MAX_ID_GROUPS) -> str | None:
    """The offending ids with their sample indices, or None when the violation names none."""
    if not violation.ids:
        return None
    groups = id_groups(violation.ids, violation.sample_indices)
    total = violation.id_count if violation.id_count is not None else len(violation.ids)
    text = ", ".join(groups[:max_groups])
    if len(groups) > max_groups or total > len(violation.ids):
        text += f", ... ({plural(total, 'id')} in all)"
    samples = violation.sample_indices
    if samples and len(samples) != len(violation.ids):
        spans = [_span(samples[s], n) for s, n in _runs(samples)]
        text += f"; samples {', '.join(spans[:max_groups])}"
        text += ", ..." if len(spans) > max_groups else ""
    return text


@dataclass(frozen=True)
class Hidden:
    """Violations of one rule that a report counts without showing them."""

    code: str
    errors: int
    warnings: int


def first_violations(
    report: Report, limit: int
) -> tuple[list[tuple[RuleResult, Violation]], list[Hidden]]:
    """The first ``limit`` violations (errors before warnings, rules in report order), and
    per rule the counts of the rest."""
    ordered = sorted(
        ((r, v) for r in report.results for v in r.violations),
        key=lambda rv: rv[1].severity is not Severity.ERROR,
    )
    shown = ordered[: max(limit, 0)]
    hidden: dict[str, list[int]] = {}
    for result, violation in ordered[max(limit, 0) :]:
        counts = hidden.setdefault(result.code, [0, 0])
        counts[violation.severity is not Severity.ERROR] += 1
    return shown, [Hidden(code, e, w) for code, (e, w) in hidden.items()]


def hidden_text(hidden: Sequence[Hidden]) -> str:
    """``... and 32 more: FT004 30 errors; FT005 2 warnings``."""
    total = sum(h.errors + h.warnings for h in hidden)
    parts = []
    for h in hidden:
        counts = [plural(n, w) for n, w in ((h.errors, "error"), (h.warnings, "warning")) if n]
        parts.append(f"{h.code} {', '.join(counts)}")
    return f"... and {total} more: {'; '.join(parts)}"
