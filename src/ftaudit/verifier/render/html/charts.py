"""The report's charts: witness coverage per committed step (expected against seen) and
metric curves (committed history solid, abandoned stretches faint)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from ftaudit.verifier.history import MetricPoint, RunHistory
from ftaudit.verifier.render.describe import plural
from ftaudit.verifier.render.html.buckets import bucket_size, coverage_buckets, metric_buckets
from ftaudit.verifier.render.html.svg import esc, num, step_width, tick_every, title


def coverage_svg(pic: RunHistory, flagged_steps: set[int]) -> str:
    n_steps = (max(c.step for c in pic.coverage) + 1) if pic.coverage else 1
    k = bucket_size(n_steps)
    cov = coverage_buckets(pic.coverage, k)
    flagged = {s // k for s in flagged_steps}
    n_cols = math.ceil(n_steps / k)
    cw = step_width(n_cols)
    h, top, left = 140.0, 12.0, 60.0
    top_value = max([max(c.expected, c.seen + c.missing) for c in cov] + [1])
    scale = h / top_value
    width = left + n_cols * cw + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="coverage-svg" width="{num(width)}" '
        f'height="{num(h + top + 34)}" role="img" aria-label="witness coverage per step">'
    ]
    base = top + h
    out.append('<g class="axis">')
    for frac in (0, 0.5, 1):
        v = top_value * frac
        y = base - v * scale
        out.append(f'<text x="{left - 6}" y="{num(y + 4)}" text-anchor="end">{v:.0f}</text>')
        out.append(
            f'<line x1="{left}" x2="{num(width - 10)}" y1="{num(y)}" y2="{num(y)}" stroke="#eee"/>'
        )
    every = tick_every(n_cols, cw) * k
    for step in range(0, n_steps, every):
        x = left + step // k * cw + cw / 2
        out.append(f'<text x="{num(x)}" y="{num(base + 14)}" text-anchor="middle">{step}</text>')
    out.append(f'<text x="{left}" y="{num(base + 30)}">step</text>')
    out.append("</g>")
    for c in cov:
        x = left + c.step // k * cw + 1
        w = max(cw - 3, 1.5)
        anchor = f"cov-s{c.step}"
        if not c.ok or c.step // k in flagged:
            out.append(
                f'<rect class="cov-band" x="{num(x - 1)}" y="{num(top)}" '
                f'width="{num(cw)}" height="{num(h)}"/>'
            )
        matched = c.seen - c.extra
        where = (
            f"step {c.step} (attempt {c.attempt}, incarnation {c.incarnation})"
            if k == 1
            else f"steps {c.step}-{min(c.step // k * k + k, n_steps) - 1}"
        )
        tip = (
            f"{where}: "
            f"{c.seen} of {c.expected} expected slots seen over {plural(c.snapshots, 'snapshot')}"
            f"; {c.missing} missing, {c.extra} extra"
        )
        y_matched = base - matched * scale
        out.append(f'<g id="{anchor}">{title(tip)}')
        out.append(
            f'<rect class="cov-seen" x="{num(x)}" y="{num(y_matched)}" width="{num(w)}" '
            f'height="{num(matched * scale)}"/>'
        )
        if c.missing:
            y_miss = y_matched - c.missing * scale
            out.append(
                f'<rect class="cov-missing" x="{num(x)}" y="{num(y_miss)}" width="{num(w)}" '
                f'height="{num(c.missing * scale)}"/>'
            )
        if c.extra:
            y_extra = y_matched - (c.missing + c.extra) * scale
            out.append(
                f'<rect class="cov-extra" x="{num(x)}" y="{num(y_extra)}" width="{num(w)}" '
                f'height="{num(c.extra * scale)}"/>'
            )
        out.append(
            f'<rect class="cov-expected" x="{num(x)}" y="{num(base - c.expected * scale)}" '
            f'width="{num(w)}" height="{num(c.expected * scale)}"/>'
        )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def polyline(points: Iterable[tuple[float, float]], cls: str, tip: str) -> str:
    pts = " ".join(f"{num(x)},{num(y)}" for x, y in points)
    return f'<polyline class="{cls}" points="{pts}">{title(tip)}</polyline>'


def metric_svg(name: str, points: list[MetricPoint], n_steps: int, index: int) -> str:
    points = metric_buckets(points, n_steps)
    w, h, left, top, bottom = 560.0, 170.0, 56.0, 10.0, 26.0
    finite = [p.value for p in points if math.isfinite(p.value)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 1.0)
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.08
    lo, hi = lo - pad, hi + pad
    plot_w = w - left - 12
    plot_h = h - top - bottom

    def xy(step: int, value: float) -> tuple[float, float]:
        x = left + (step + 0.5) / max(n_steps, 1) * plot_w
        return x, top + (hi - value) / (hi - lo) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="metric-{index}" width="{w:.0f}" '
        f'height="{h:.0f}" role="img" aria-label="{esc(name)} per step">'
    ]
    out.append('<g class="axis">')
    for frac in (0.0, 0.5, 1.0):
        v = lo + (hi - lo) * frac
        y = top + (1 - frac) * plot_h
        out.append(f'<text x="{left - 5}" y="{num(y + 4)}" text-anchor="end">{v:.4g}</text>')
        out.append(
            f'<line x1="{left}" x2="{num(w - 12)}" y1="{num(y)}" y2="{num(y)}" stroke="#eee"/>'
        )
    every = tick_every(n_steps, plot_w / max(n_steps, 1))
    for step in range(0, n_steps, every):
        x, _ = xy(step, lo)
        out.append(f'<text x="{num(x)}" y="{num(h - 8)}" text-anchor="middle">{step}</text>')
    out.append("</g>")
    # abandoned stretches: per incarnation, its points outside the committed history
    # (rolled back or unfinished), joined to the committed point just before them
    by_inc: dict[int, list[MetricPoint]] = defaultdict(list)
    for p in points:
        by_inc[p.incarnation].append(p)
    for inc, pts in sorted(by_inc.items()):
        pts = sorted(pts, key=lambda p: (p.step, p.attempt))
        last_step: dict[int, MetricPoint] = {}
        for p in pts:
            if p.status != "retried":
                last_step[p.step] = p
        line = sorted(last_step.values(), key=lambda p: p.step)
        stretch: list[tuple[float, float]] = []
        prev: MetricPoint | None = None
        for p in line:
            if p.status in ("rolled_back", "unfinished") and math.isfinite(p.value):
                if not stretch and prev is not None and math.isfinite(prev.value):
                    stretch.append(xy(prev.step, prev.value))
                stretch.append(xy(p.step, p.value))
            elif stretch:
                out.append(polyline(stretch, "m-abandoned", f"abandoned by incarnation {inc}"))
                stretch = []
            prev = p
        if stretch:
            out.append(polyline(stretch, "m-abandoned", f"abandoned by incarnation {inc}"))
    for p in points:
        if p.status == "retried" and math.isfinite(p.value):
            x, y = xy(p.step, p.value)
            out.append(
                f'<circle class="m-retried" cx="{num(x)}" cy="{num(y)}" r="2.5">'
                f"{title(f'retried attempt {p.attempt} of step {p.step}: {p.value:.6g}')}"
                "</circle>"
            )
    committed = sorted((p for p in points if p.status == "committed"), key=lambda p: p.step)
    run: list[tuple[float, float]] = []
    for p in committed:
        if math.isfinite(p.value):
            run.append(xy(p.step, p.value))
            continue
        if run:
            out.append(polyline(run, "m-committed", f"{name}, committed history"))
            run = []
        x, _ = xy(p.step, lo)
        out.append(
            f'<path class="m-nan" d="M{num(x - 4)} {top + 2} l8 8 m0 -8 l-8 8">'
            f"{title(f'{name} is {p.value} at step {p.step}')}</path>"
        )
    if run:
        if len(run) == 1:
            x, y = run[0]
            out.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="2.5" fill="#2459c6"/>')
        out.append(polyline(run, "m-committed", f"{name}, committed history"))
    out.append("</svg>")
    return "\n".join(out)
