"""Metrics equivalence: the committed metrics of one run against another's, within tolerance.

A fault-tolerant run must train the same model as a run without faults: its committed
history (the ``committed_steps`` view: accepted attempts of the lineage of the final
model, never retried or rolled-back work) must log the same metrics at every step.

Per run, each metric at each committed step is one value: the writers that logged it in
the committed attempt (one per cell and rank, or the driver alone) are reduced with
``sum`` or ``mean``. Two values match when ``|t - b| <= atol + rtol * |b|`` (NumPy's
``isclose``); NaN matches NaN, an infinity matches the same infinity; NaN on one side
only is a violation. A step or metric present on one side only is a violation too.
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ftaudit.verifier.session import Session

COMMITTED_METRICS = """
    SELECT step, name, value FROM committed_metrics ORDER BY step, name, writer, seq"""
"""Every metric value logged in an attempt of the committed history."""


class Reduce(StrEnum):
    """How the values several writers logged for one metric at one step become one."""

    MEAN = "mean"
    SUM = "sum"


class Kind(StrEnum):
    VALUE = "value"
    """Both sides have a finite value and they differ beyond the tolerance."""
    NAN = "nan"
    """NaN (or an infinity) on one side only, or infinities of opposite sign."""
    MISSING_STEP = "missing_step"
    """The metric was logged at this committed step on one side only."""
    MISSING_METRIC = "missing_metric"
    """The metric is logged by one run and never by the other."""


@dataclass(frozen=True)
class Difference:
    kind: Kind
    metric: str
    step: int | None
    baseline: float | None
    target: float | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "metric": self.metric,
            "step": self.step,
            "baseline": _json_float(self.baseline),
            "target": _json_float(self.target),
            "message": self.message,
        }


@dataclass(frozen=True)
class MetricSummary:
    name: str
    steps: int
    """Steps compared (logged on both sides)."""
    differences: int
    max_abs_diff: float
    max_rel_diff: float


@dataclass(frozen=True)
class Comparison:
    baseline: str
    target: str
    rtol: float
    atol: float
    reduce: Reduce
    metrics: tuple[MetricSummary, ...]
    differences: tuple[Difference, ...] = field(default_factory=tuple)

    @property
    def passed(self) -> bool:
        return not self.differences and bool(self.metrics)

    def headline(self) -> str:
        n = len(self.metrics)
        compared = sum(m.steps for m in self.metrics)
        if not n:
            return "nothing compared: no committed metric matched on either side"
        if self.passed:
            return (
                f"equivalent: {n} metric{'s' if n != 1 else ''} agree at {compared} "
                f"committed step values (rtol {self.rtol:g}, atol {self.atol:g})"
            )
        d = len(self.differences)
        return (
            f"DIFFERENT: {d} difference{'s' if d != 1 else ''} in "
            f"{len({x.metric for x in self.differences})} of {n} "
            f"metric{'s' if n != 1 else ''} (rtol {self.rtol:g}, atol {self.atol:g})"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "target": self.target,
            "rtol": self.rtol,
            "atol": self.atol,
            "reduce": self.reduce.value,
            "passed": self.passed,
            "metrics": [
                {
                    "name": m.name,
                    "steps": m.steps,
                    "differences": m.differences,
                    "max_abs_diff": _json_float(m.max_abs_diff),
                    "max_rel_diff": _json_float(m.max_rel_diff),
                }
                for m in self.metrics
            ],
            "differences": [d.to_dict() for d in self.differences],
        }


def _json_float(value: float | None) -> float | str | None:
    """JSON has no NaN or infinity: those become the strings ``nan``, ``inf``, ``-inf``."""
    if value is None or math.isfinite(value):
        return value
    return str(value)


def committed_metrics(
    run_dir: str | os.PathLike[str], reduce: Reduce = Reduce.MEAN
) -> dict[str, dict[int, float]]:
    """``{metric: {step: value}}`` over the committed history of a run."""
    with Session.open(run_dir) as session:
        rows = session.rows(COMMITTED_METRICS, label="committed metrics")
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in rows:
        values[(r["name"], r["step"])].append(float(r["value"]))
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for (name, step), vals in values.items():
        total = math.fsum(vals) if all(math.isfinite(v) for v in vals) else sum(vals)
        out[name][step] = total if reduce is Reduce.SUM else total / len(vals)
    return dict(out)


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _compare_values(b: float, t: float, rtol: float, atol: float) -> Kind | None:
    if math.isnan(b) and math.isnan(t):
        return None
    if math.isnan(b) or math.isnan(t):
        return Kind.NAN
    if math.isinf(b) or math.isinf(t):
        return None if b == t else Kind.NAN
    return None if abs(t - b) <= atol + rtol * abs(b) else Kind.VALUE


def compare_runs(
    baseline: str | os.PathLike[str],
    target: str | os.PathLike[str],
    *,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    metrics: tuple[str, ...] = (),
    reduce: Reduce = Reduce.MEAN,
) -> Comparison:
    """Compare the committed metrics of ``target`` against ``baseline``.

    ``metrics`` are glob patterns (``loss``, ``eval/*``); none means every metric.
    Raises :class:`ftaudit.errors.UnusableInputError` when a run cannot be read.
    """
    if rtol < 0 or atol < 0:
        raise ValueError("rtol and atol must be non-negative")
    base = committed_metrics(baseline, reduce)
    tgt = committed_metrics(target, reduce)

    def wanted(name: str) -> bool:
        return not metrics or any(fnmatch.fnmatchcase(name, p) for p in metrics)

    diffs: list[Difference] = []
    summaries: list[MetricSummary] = []
    for name in sorted({n for n in (*base, *tgt) if wanted(n)}):
        if name not in tgt or name not in base:
            side, other = ("target", "baseline") if name not in tgt else ("baseline", "target")
            diffs.append(
                Difference(
                    Kind.MISSING_METRIC,
                    name,
                    None,
                    None,
                    None,
                    f"metric {name!r} is never logged in the committed history of the {side} "
                    f"run, but the {other} run logs it",
                )
            )
            summaries.append(MetricSummary(name, 0, 1, math.nan, math.nan))
            continue
        b_steps, t_steps = base[name], tgt[name]
        mine: list[Difference] = []
        max_abs = max_rel = 0.0
        both = sorted(b_steps.keys() & t_steps.keys())
        for step in sorted(b_steps.keys() ^ t_steps.keys()):
            missing_in = "target" if step not in t_steps else "baseline"
            present = b_steps.get(step, t_steps.get(step))
            mine.append(
                Difference(
                    Kind.MISSING_STEP,
                    name,
                    step,
                    b_steps.get(step),
                    t_steps.get(step),
                    f"{name} at step {step}: no committed value in the {missing_in} run "
                    f"(the other run has {_fmt(present if present is not None else math.nan)})",
                )
            )
        for step in both:
            b, t = b_steps[step], t_steps[step]
            kind = _compare_values(b, t, rtol, atol)
            if math.isfinite(b) and math.isfinite(t):
                max_abs = max(max_abs, abs(t - b))
                if b != 0:
                    max_rel = max(max_rel, abs(t - b) / abs(b))
            if kind is None:
                continue
            if kind is Kind.NAN:
                text = f"{name} at step {step}: baseline {_fmt(b)}, target {_fmt(t)}"
                text += (
                    " (not finite on one side only)"
                    if math.isfinite(b) or math.isfinite(t)
                    else " (infinities of opposite sign)"
                )
            else:
                rel = abs(t - b) / abs(b) if b else math.inf
                text = (
                    f"{name} at step {step}: baseline {_fmt(b)}, target {_fmt(t)} "
                    f"(differ by {abs(t - b):.3g}, relative {rel:.3g}; allowed "
                    f"{atol + rtol * abs(b):.3g})"
                )
            mine.append(Difference(kind, name, step, b, t, text))
        mine.sort(key=lambda d: (d.step if d.step is not None else -1, d.kind.value))
        diffs.extend(mine)
        summaries.append(MetricSummary(name, len(both), len(mine), max_abs, max_rel))
    return Comparison(
        baseline=os.fspath(baseline),
        target=os.fspath(target),
        rtol=rtol,
        atol=atol,
        reduce=reduce,
        metrics=tuple(summaries),
        differences=tuple(diffs),
    )
