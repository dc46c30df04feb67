"""Long runs on one page: steps grouped into buckets so the page stays small.

A page draws a column per step up to :data:`MAX_COLUMNS` steps; beyond, ``k`` consecutive
steps share a column (``k`` the smallest that fits) and every chart draws one mark per
bucket instead of one per step: the timeline one box per incarnation and bucket (its
worst status, so an abandoned stretch stays visible, with the counts in the tooltip),
the coverage chart the bucket's sums, the metric curves the bucket's mean (NaN and
abandoned stretches kept as their own marks). The page's size then grows with the
number of incarnations, cells, metrics and findings, not with the number of steps.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ftaudit.verifier.coverage import StepCoverage
from ftaudit.verifier.history import AttemptInfo, CellState, MetricPoint

MAX_COLUMNS = 400
"""Columns the timeline and coverage charts draw at most (one per step below that)."""

MAX_POINTS = 400
"""Points a metric curve draws at most per incarnation and status."""

STATUS_ORDER = ("unfinished", "rolled_back", "retried", "committed")
"""A bucket shows its first status in this order: what was lost stays visible."""

CELL_ORDER = ("errored", "discarded", "normal")


def bucket_size(n_steps: int, limit: int = MAX_COLUMNS) -> int:
    """The steps per column: 1 up to ``limit`` steps, else the smallest ``k`` that fits."""
    return max(1, math.ceil(n_steps / limit))


@dataclass(frozen=True)
class AttemptBucket:
    """The attempts of one incarnation in one bucket of steps."""

    incarnation: int
    bucket: int
    first_step: int
    last_step: int
    status: str
    """The first of :data:`STATUS_ORDER` among its attempts."""
    counts: tuple[tuple[str, int], ...]
    """Attempts per status, in :data:`STATUS_ORDER`."""
    cells: tuple[CellState, ...]
    """Per cell, its worst state in the bucket (:data:`CELL_ORDER`)."""

    @property
    def anchor(self) -> str:
        return self.anchor_of(self.incarnation, self.bucket)

    @staticmethod
    def anchor_of(incarnation: int, bucket: int) -> str:
        return f"t-i{incarnation}-b{bucket}"

    def tooltip(self) -> str:
        counts = ", ".join(f"{n} {s.replace('_', ' ')}" for s, n in self.counts)
        cells = ", ".join(f"cell {c.cell} {c.state}" for c in self.cells)
        steps = f"steps {self.first_step}-{self.last_step}"
        return f"{steps} (incarnation {self.incarnation}): {counts}" + (
            f"; worst: {cells}" if cells else ""
        )


def attempt_buckets(attempts: Iterable[AttemptInfo], k: int) -> list[AttemptBucket]:
    """One :class:`AttemptBucket` per incarnation and bucket that holds an attempt."""
    groups: dict[tuple[int, int], list[AttemptInfo]] = defaultdict(list)
    for a in attempts:
        groups[(a.incarnation, a.step // k)].append(a)
    out = []
    for (inc, b), group in sorted(groups.items()):
        counts = {s: sum(a.status == s for a in group) for s in STATUS_ORDER}
        status = next((s for s in STATUS_ORDER if counts[s]), group[0].status)
        worst: dict[int, str] = {}
        for a in group:
            for c in a.cells:
                now = worst.get(c.cell)
                if now is None or _rank(c.state) < _rank(now):
                    worst[c.cell] = c.state
        out.append(
            AttemptBucket(
                inc,
                b,
                min(a.step for a in group),
                max(a.step for a in group),
                status,
                tuple((s, n) for s, n in counts.items() if n),
                tuple(CellState(c, s) for c, s in sorted(worst.items())),
            )
        )
    return out


def _rank(state: str) -> int:
    return CELL_ORDER.index(state) if state in CELL_ORDER else len(CELL_ORDER)


def coverage_buckets(coverage: list[StepCoverage], k: int) -> list[StepCoverage]:
    """Coverage summed per bucket (``step`` is the bucket's first committed step)."""
    if k == 1:
        return coverage
    groups: dict[int, list[StepCoverage]] = defaultdict(list)
    for c in coverage:
        groups[c.step // k].append(c)
    return [
        StepCoverage(
            step=min(c.step for c in group),
            attempt=group[0].attempt,
            incarnation=group[0].incarnation,
            snapshots=sum(c.snapshots for c in group),
            expected=sum(c.expected for c in group),
            seen=sum(c.seen for c in group),
            missing=sum(c.missing for c in group),
            extra=sum(c.extra for c in group),
        )
        for _, group in sorted(groups.items())
    ]


def metric_buckets(points: list[MetricPoint], n_steps: int) -> list[MetricPoint]:
    """A metric's points, one per incarnation, status and bucket (the bucket's mean;
    a bucket's non-finite values kept as one point of their own, so NaN stays marked)."""
    k = bucket_size(n_steps, MAX_POINTS)
    if k == 1:
        return points
    groups: dict[tuple[int, str, int, bool], list[MetricPoint]] = defaultdict(list)
    for p in points:
        groups[(p.incarnation, p.status, p.step // k, math.isfinite(p.value))].append(p)
    out = []
    for (_inc, _status, _b, finite), group in groups.items():
        first = min(group, key=lambda p: (p.step, p.attempt))
        value = sum(p.value for p in group) / len(group) if finite else first.value
        out.append(
            MetricPoint(
                first.incarnation,
                first.step,
                first.attempt,
                first.status,
                value,
                max(p.writers for p in group),
            )
        )
    return sorted(out, key=lambda p: (p.incarnation, p.step, p.attempt))
