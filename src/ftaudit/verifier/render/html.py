"""``ftaudit report``: a run as one self-contained HTML page (inline SVG, CSS and JS).

Four parts: the timeline (steps across; per incarnation a lane of attempts and a lane per
cell; retries, rollbacks, crashes, faults, heals, checkpoints and restores marked),
witness coverage per committed step (expected against seen), metric curves (committed
history solid, abandoned stretches faint), and the verifier's findings, each linked to
the element of the timeline where it happens. Nothing is fetched: the page opens offline.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Iterable

from ftaudit.verifier.findings import Location, Report, Severity, Violation
from ftaudit.verifier.history import AttemptInfo, MetricPoint, RunHistory
from ftaudit.verifier.render.describe import (
    ids_text,
    location_text,
    plural,
    rule_status,
    summarize,
)
from ftaudit.verifier.render.html_assets import CSS, JS

LABEL_W = 150
"""Width of the lane labels on the left of the timeline."""
TOP = 30
ATT_H = 22
CELL_H = 14
GAP = 10
_DASHED = "repeating-linear-gradient(45deg, #d7263d 0 2px, #fff 2px 4px)"
MAX_FINDINGS = 500
"""Findings listed on the page (the rest are counted)."""


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _title(text: str) -> str:
    return f"<title>{esc(text)}</title>"


def _step_width(n_steps: int) -> float:
    return max(12.0, min(72.0, 1100.0 / max(n_steps, 1)))


def _tick_every(n_steps: int, cw: float) -> int:
    every = 1
    for candidate in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000):
        every = candidate
        if candidate * cw >= 28:
            break
    return every


class _Timeline:
    """Lays out the timeline and remembers which anchors exist (for linking findings)."""

    def __init__(self, pic: RunHistory) -> None:
        self.pic = pic
        self.n_steps = (max(pic.steps) + 1) if pic.steps else 1
        self.cw = _step_width(self.n_steps)
        self.anchors: set[str] = set()
        self.lane_y: dict[tuple[int, int | None], float] = {}
        """(incarnation, cell or None for the attempts lane) -> top y."""
        y = TOP
        for inc in pic.incarnations:
            self.lane_y[(inc.number, None)] = y
            y += ATT_H + 4
            for cell in pic.cells:
                self.lane_y[(inc.number, cell)] = y
                y += CELL_H + 2
            y += GAP
        self.height = y + 6
        self.width = LABEL_W + self.n_steps * self.cw + 20

    def x(self, step: int) -> float:
        return LABEL_W + step * self.cw

    def attempt_box(self, a: AttemptInfo, of: list[AttemptInfo]) -> tuple[float, float]:
        """x and width of an attempt inside its step's column (attempts side by side)."""
        n = len(of)
        i = of.index(a)
        inner = self.cw - 2
        w = inner / n
        return self.x(a.step) + 1 + i * w, max(w - 1, 1.5)

    def svg(self, bad: dict[str, list[str]]) -> str:
        pic, cw = self.pic, self.cw
        out: list[str] = [
            f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline-svg" '
            f'width="{_num(self.width)}" height="{_num(self.height)}" '
            f'viewBox="0 0 {_num(self.width)} {_num(self.height)}" role="img" '
            f'aria-label="timeline of the run">'
        ]
        # step columns: targets for findings that only name a step
        for step in range(self.n_steps):
            anchor = f"t-s{step}"
            self.anchors.add(anchor)
            out.append(
                f'<rect class="step-col" id="{anchor}" x="{_num(self.x(step))}" y="{TOP - 4}" '
                f'width="{_num(cw)}" height="{_num(self.height - TOP)}"/>'
            )
        # axis
        every = _tick_every(self.n_steps, cw)
        out.append('<g class="axis">')
        out.append(f'<text x="4" y="{TOP - 12}">step</text>')
        for step in range(0, self.n_steps, every):
            x = self.x(step) + cw / 2
            out.append(f'<text x="{_num(x)}" y="{TOP - 12}" text-anchor="middle">{step}</text>')
            out.append(
                f'<line x1="{_num(x)}" x2="{_num(x)}" y1="{TOP - 8}" y2="{TOP - 4}" stroke="#bbb"/>'
            )
        out.append("</g>")
        by_inc_step: dict[tuple[int, int], list[AttemptInfo]] = defaultdict(list)
        for a in pic.attempts:
            by_inc_step[(a.incarnation, a.step)].append(a)
        for inc in pic.incarnations:
            y = self.lane_y[(inc.number, None)]
            lane = f"t-i{inc.number}"
            self.anchors.add(lane)
            out.append(f'<g id="{lane}">')
            label = f"incarnation {inc.number}"
            out.append(
                f'<text class="lane-label" x="4" y="{_num(y + 15)}">{esc(label)}'
                f"{_title(inc.resume_text + '; ' + inc.status)}</text>"
            )
            for cell in pic.cells:
                cy = self.lane_y[(inc.number, cell)]
                out.append(f'<text x="16" y="{_num(cy + 11)}">cell {cell}</text>')
            out.append("</g>")
            for (i, _step), attempts in sorted(by_inc_step.items()):
                if i != inc.number:
                    continue
                for a in attempts:
                    out.extend(self._attempt(a, attempts, bad))
        out.extend(self._markers(bad))
        out.append("</svg>")
        return "\n".join(out)

    def _attempt(
        self, a: AttemptInfo, attempts: list[AttemptInfo], bad: dict[str, list[str]]
    ) -> list[str]:
        x, w = self.attempt_box(a, attempts)
        y = self.lane_y[(a.incarnation, None)]
        anchor = a.anchor
        self.anchors.add(anchor)
        cells_txt = ", ".join(f"cell {c.cell} {c.state}" for c in a.cells) or "no decision logged"
        tip = (
            f"step {a.step} attempt {a.attempt} (incarnation {a.incarnation}): "
            f"{a.status.replace('_', ' ')}; {cells_txt}"
        )
        finding = _finding_attr(bad.get(anchor))
        out = [
            f'<rect class="att {a.status}" id="{anchor}" x="{_num(x)}" y="{_num(y)}" '
            f'width="{_num(w)}" height="{ATT_H}" rx="2"{finding}>{_title(tip)}</rect>'
        ]
        if anchor in bad:
            out.append(_bad_mark(x, y, w, ATT_H))
        faint = " faint" if a.status != "committed" else ""
        for c in a.cells:
            if (a.incarnation, c.cell) not in self.lane_y:
                continue
            cy = self.lane_y[(a.incarnation, c.cell)]
            canchor = f"{anchor}-c{c.cell}"
            self.anchors.add(canchor)
            ctip = f"cell {c.cell}: {c.state} in step {a.step} attempt {a.attempt}"
            cfinding = _finding_attr(bad.get(canchor))
            out.append(
                f'<rect class="cell {c.state}{faint}" id="{canchor}" x="{_num(x)}" '
                f'y="{_num(cy)}" width="{_num(w)}" height="{CELL_H}"{cfinding}>'
                f"{_title(ctip)}</rect>"
            )
            if c.state == "errored":
                m = min(w, CELL_H) / 2 - 1
                cx, cyy = x + w / 2, cy + CELL_H / 2
                out.append(
                    f'<path class="crash" d="M{_num(cx - m)} {_num(cyy - m)} '
                    f"L{_num(cx + m)} {_num(cyy + m)} M{_num(cx + m)} {_num(cyy - m)} "
                    f'L{_num(cx - m)} {_num(cyy + m)}">{_title(ctip + " (crashed)")}</path>'
                )
            if canchor in bad:
                out.append(_bad_mark(x, cy, w, CELL_H))
        return out

    def _markers(self, bad: dict[str, list[str]]) -> list[str]:
        pic, cw = self.pic, self.cw
        out: list[str] = []
        # faults: a red triangle at the top of the lane it hit
        for n, f in enumerate(pic.faults):
            if f.step is None or (f.incarnation, None) not in self.lane_y:
                continue
            lane = (f.incarnation, f.cell) if (f.incarnation, f.cell) in self.lane_y else None
            y = self.lane_y[lane] if lane else self.lane_y[(f.incarnation, None)]
            x = self.x(f.step) + 2
            anchor = f"fault-{n}"
            self.anchors.add(anchor)
            tip = f"fault injected: {f.mode} {f.target}, step {f.step} attempt {f.attempt}"
            out.append(
                f'<path class="fault" id="{anchor}" d="M{_num(x)} {_num(y - 3)} '
                f'l8 0 l-4 8 z">{_title(tip)}</path>'
            )
        # heals: a "+" disc in the healed cell's lane
        for r in pic.reconfigs:
            if r.step is None:
                continue
            for cell in r.healed_cells:
                if (r.incarnation, cell) not in self.lane_y:
                    continue
                y = self.lane_y[(r.incarnation, cell)] + CELL_H / 2
                x = self.x(r.step) + 1
                src = f" from cell {r.heal_source}" if r.heal_source is not None else ""
                tip = f"cell {cell} healed{src} before step {r.step}"
                out.append(
                    f'<g class="heal-mark"><circle class="heal" cx="{_num(x)}" cy="{_num(y)}" '
                    f'r="5">{_title(tip)}</circle><path d="M{_num(x - 3)} {_num(y)} h6 '
                    f'M{_num(x)} {_num(y - 3)} v6" stroke="#fff" stroke-width="1.6"/></g>'
                )
        # checkpoints (diamond at the end of the iteration's column) and restores (arrows)
        spot: dict[tuple[int, int], tuple[float, float]] = {}
        for c in pic.checkpoints:
            if (c.incarnation, None) not in self.lane_y:
                continue
            x = self.x(c.iteration) + cw - 1
            y = self.lane_y[(c.incarnation, None)] - 1
            spot[(c.iteration, c.incarnation)] = (x, y)
            anchor = f"ck-i{c.incarnation}-{c.iteration}"
            self.anchors.add(anchor)
            restored = (
                f"; restored by incarnation {', '.join(map(str, c.resumed_by))}"
                if c.resumed_by
                else ""
            )
            tip = f"checkpoint {c.iteration} saved by incarnation {c.incarnation}{restored}"
            out.append(
                f'<path class="ckpt" id="{anchor}" d="M{_num(x)} {_num(y - 5)} l5 5 l-5 5 '
                f'l-5 -5 z">{_title(tip)}</path>'
            )
        for inc in pic.incarnations:
            if inc.resumed_iteration is None or inc.resumed_incarnation is None:
                continue
            src = spot.get((inc.resumed_iteration, inc.resumed_incarnation))
            if src is None or (inc.number, None) not in self.lane_y:
                continue
            x1, y1 = src
            x2 = self.x(inc.resumed_iteration + 1) + 1
            y2 = self.lane_y[(inc.number, None)] + ATT_H / 2
            tip = (
                f"incarnation {inc.number} restored checkpoint {inc.resumed_iteration} "
                f"(saved by incarnation {inc.resumed_incarnation})"
            )
            mid = (y1 + y2) / 2
            out.append(
                f'<path class="restore" id="restore-i{inc.number}" '
                f'd="M{_num(x1)} {_num(y1 + 5)} C{_num(x1)} {_num(mid)} {_num(x2 - 8)} '
                f'{_num(mid)} {_num(x2 - 6)} {_num(y2)}">{_title(tip)}</path>'
                f'<path class="ckpt" d="M{_num(x2 - 6)} {_num(y2 - 4)} l5 4 l-5 4 z"/>'
            )
            self.anchors.add(f"restore-i{inc.number}")
        return out


def _finding_attr(findings: list[str] | None) -> str:
    return f' data-finding="{esc(findings[0])}"' if findings else ""


def _bad_mark(x: float, y: float, w: float, h: float) -> str:
    return (
        f'<rect class="bad-mark" x="{_num(x - 1.5)}" y="{_num(y - 1.5)}" '
        f'width="{_num(w + 3)}" height="{_num(h + 3)}" rx="3"/>'
    )


def _target(loc: Location, pic: RunHistory) -> str | None:
    """The most precise timeline anchor for a violation's location."""
    step, attempt, inc = loc.step, loc.attempt, loc.incarnation
    if step is not None and inc is None:
        committed = [a for a in pic.attempts if a.step == step and a.status == "committed"]
        if committed and (attempt is None or committed[0].attempt == attempt):
            inc, attempt = committed[0].incarnation, committed[0].attempt
    if step is not None and inc is not None and attempt is not None:
        base = f"t-i{inc}-s{step}-a{attempt}"
        if loc.cell is not None:
            return f"{base}-c{loc.cell}"
        return base
    if step is not None:
        return f"t-s{step}"
    if inc is not None:
        return f"t-i{inc}"
    return None


def _violations(report: Report) -> list[tuple[str, Violation]]:
    ordered = sorted(
        ((r.name, v) for r in report.results for v in r.violations),
        key=lambda nv: nv[1].severity is not Severity.ERROR,
    )
    return ordered


def _coverage_svg(pic: RunHistory, flagged_steps: set[int]) -> str:
    cov = pic.coverage
    n_steps = (max(c.step for c in cov) + 1) if cov else 1
    cw = _step_width(n_steps)
    h, top, left = 140.0, 12.0, 60.0
    top_value = max([max(c.expected, c.seen + c.missing) for c in cov] + [1])
    scale = h / top_value
    width = left + n_steps * cw + 20
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="coverage-svg" width="{_num(width)}" '
        f'height="{_num(h + top + 34)}" role="img" aria-label="witness coverage per step">'
    ]
    base = top + h
    out.append('<g class="axis">')
    for frac in (0, 0.5, 1):
        v = top_value * frac
        y = base - v * scale
        out.append(f'<text x="{left - 6}" y="{_num(y + 4)}" text-anchor="end">{v:.0f}</text>')
        out.append(
            f'<line x1="{left}" x2="{_num(width - 10)}" y1="{_num(y)}" y2="{_num(y)}" '
            'stroke="#eee"/>'
        )
    every = _tick_every(n_steps, cw)
    for step in range(0, n_steps, every):
        x = left + step * cw + cw / 2
        out.append(f'<text x="{_num(x)}" y="{_num(base + 14)}" text-anchor="middle">{step}</text>')
    out.append(f'<text x="{left}" y="{_num(base + 30)}">step</text>')
    out.append("</g>")
    for c in cov:
        x = left + c.step * cw + 1
        w = max(cw - 3, 1.5)
        anchor = f"cov-s{c.step}"
        if not c.ok or c.step in flagged_steps:
            out.append(
                f'<rect class="cov-band" x="{_num(x - 1)}" y="{_num(top)}" '
                f'width="{_num(cw)}" height="{_num(h)}"/>'
            )
        matched = c.seen - c.extra
        tip = (
            f"step {c.step} (attempt {c.attempt}, incarnation {c.incarnation}): "
            f"{c.seen} of {c.expected} expected slots seen over {plural(c.snapshots, 'snapshot')}"
            f"; {c.missing} missing, {c.extra} extra"
        )
        y_matched = base - matched * scale
        out.append(f'<g id="{anchor}">{_title(tip)}')
        out.append(
            f'<rect class="cov-seen" x="{_num(x)}" y="{_num(y_matched)}" width="{_num(w)}" '
            f'height="{_num(matched * scale)}"/>'
        )
        if c.missing:
            y_miss = y_matched - c.missing * scale
            out.append(
                f'<rect class="cov-missing" x="{_num(x)}" y="{_num(y_miss)}" width="{_num(w)}" '
                f'height="{_num(c.missing * scale)}"/>'
            )
        if c.extra:
            y_extra = y_matched - (c.missing + c.extra) * scale
            out.append(
                f'<rect class="cov-extra" x="{_num(x)}" y="{_num(y_extra)}" width="{_num(w)}" '
                f'height="{_num(c.extra * scale)}"/>'
            )
        out.append(
            f'<rect class="cov-expected" x="{_num(x)}" y="{_num(base - c.expected * scale)}" '
            f'width="{_num(w)}" height="{_num(c.expected * scale)}"/>'
        )
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


def _polyline(points: Iterable[tuple[float, float]], cls: str, tip: str) -> str:
    pts = " ".join(f"{_num(x)},{_num(y)}" for x, y in points)
    return f'<polyline class="{cls}" points="{pts}">{_title(tip)}</polyline>'


def _metric_svg(name: str, points: list[MetricPoint], n_steps: int, index: int) -> str:
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
        out.append(f'<text x="{left - 5}" y="{_num(y + 4)}" text-anchor="end">{v:.4g}</text>')
        out.append(
            f'<line x1="{left}" x2="{_num(w - 12)}" y1="{_num(y)}" y2="{_num(y)}" stroke="#eee"/>'
        )
    every = _tick_every(n_steps, plot_w / max(n_steps, 1))
    for step in range(0, n_steps, every):
        x, _ = xy(step, lo)
        out.append(f'<text x="{_num(x)}" y="{_num(h - 8)}" text-anchor="middle">{step}</text>')
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
                out.append(_polyline(stretch, "m-abandoned", f"abandoned by incarnation {inc}"))
                stretch = []
            prev = p
        if stretch:
            out.append(_polyline(stretch, "m-abandoned", f"abandoned by incarnation {inc}"))
    for p in points:
        if p.status == "retried" and math.isfinite(p.value):
            x, y = xy(p.step, p.value)
            out.append(
                f'<circle class="m-retried" cx="{_num(x)}" cy="{_num(y)}" r="2.5">'
                f"{_title(f'retried attempt {p.attempt} of step {p.step}: {p.value:.6g}')}"
                "</circle>"
            )
    committed = sorted((p for p in points if p.status == "committed"), key=lambda p: p.step)
    run: list[tuple[float, float]] = []
    for p in committed:
        if math.isfinite(p.value):
            run.append(xy(p.step, p.value))
            continue
        if run:
            out.append(_polyline(run, "m-committed", f"{name}, committed history"))
            run = []
        x, _ = xy(p.step, lo)
        out.append(
            f'<path class="m-nan" d="M{_num(x - 4)} {top + 2} l8 8 m0 -8 l-8 8">'
            f"{_title(f'{name} is {p.value} at step {p.step}')}</path>"
        )
    if run:
        if len(run) == 1:
            x, y = run[0]
            out.append(f'<circle cx="{_num(x)}" cy="{_num(y)}" r="2.5" fill="#2459c6"/>')
        out.append(_polyline(run, "m-committed", f"{name}, committed history"))
    out.append("</svg>")
    return "\n".join(out)


def _legend(items: list[tuple[str, str]]) -> str:
    spans = "".join(f'<span style="--c:{c}">{esc(t)}</span>' for t, c in items)
    return f'<div class="legend">{spans}</div>'


def render_html(pic: RunHistory, report: Report) -> str:
    """The whole page, as one string."""
    timeline = _Timeline(pic)
    findings = _violations(report)
    bad: dict[str, list[str]] = defaultdict(list)
    targets: list[str | None] = []
    for n, (_, v) in enumerate(findings[:MAX_FINDINGS]):
        anchor = _target(v.location, pic)
        targets.append(anchor)
        if anchor:
            bad[anchor].append(f"v-{n + 1}")
    timeline_svg = timeline.svg(bad)
    summary = summarize(report, strict=False)
    committed = pic.committed_steps

    parts: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ftaudit report: {esc(pic.run_dir)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>ftaudit report</h1>",
        f'<div class="run">{esc(pic.run_dir)}</div>',
        f'<div class="verdict {"pass" if summary.passed else "fail"}" id="verdict">'
        f"{esc(summary.headline())}</div>",
        '<div class="facts">'
        + esc(
            ", ".join(
                [
                    plural(len(pic.incarnations), "incarnation"),
                    plural(len(committed), "committed step"),
                    plural(len(pic.attempts), "attempt"),
                    f"{pic.retries()} retried",
                    plural(len(pic.faults), "fault"),
                    plural(sum(len(r.healed_cells) for r in pic.reconfigs), "heal"),
                    plural(len(pic.checkpoints), "checkpoint"),
                    plural(len(pic.cells), "cell"),
                ]
                + ([f"B={pic.buffer_size}"] if pic.buffer_size else [])
            )
        )
        + "</div></header><main>",
    ]

    # timeline
    parts.append('<section id="timeline"><h2>Timeline</h2>')
    parts.append(
        _legend(
            [
                ("committed", "var(--ok)"),
                ("retried", "var(--retry)"),
                ("rolled back", "var(--abandon)"),
                ("unfinished (died mid-step)", _DASHED),
                ("cell normal", "#9ed8b1"),
                ("cell discarded", "var(--retry)"),
                ("cell crashed", "#f4b4bc"),
                ("fault", "var(--bad)"),
                ("heal", "var(--heal)"),
                ("checkpoint / restore", "var(--ckpt)"),
            ]
        )
    )
    parts.append(f'<div class="scroll">{timeline_svg}</div>')
    parts.append(
        '<p class="none">Hover a mark for details. Steps run left to right; each '
        "incarnation has a lane of attempts (side by side when a step was retried) and a "
        "lane per cell. A red frame marks where a finding points.</p></section>"
    )

    # coverage
    parts.append('<section id="coverage"><h2>Witness coverage</h2>')
    if pic.coverage:
        flagged = {
            v.location.step
            for _, v in findings
            if v.code == "FT004" and v.location.step is not None
        }
        exact = sum(c.ok for c in pic.coverage)
        parts.append(
            f"<p>Per committed step, the witness slots FT004 expects to be nonzero "
            f"(outline) against those seen (filled), summed over the snapshots of the normal "
            f"cells: {exact} of {plural(len(pic.coverage), 'step')} exact.</p>"
        )
        parts.append(
            _legend(
                [
                    ("seen and expected", "var(--ok)"),
                    ("missing (gradient lost)", "var(--bad)"),
                    ("extra (abandoned work leaked)", "var(--extra)"),
                ]
            )
        )
        parts.append(f'<div class="scroll">{_coverage_svg(pic, flagged)}</div>')
    else:
        parts.append('<p class="none">No witness allocations in this run.</p>')
    parts.append("</section>")

    # metrics
    parts.append('<section id="metrics"><h2>Metrics</h2>')
    if pic.metrics:
        parts.append(
            "<p>Committed history solid (the mean over the writers that logged the metric); "
            "stretches an incarnation trained and a later one rolled back dashed and faint; "
            "retried attempts as grey dots; NaN as a red cross.</p>"
        )
        parts.append(
            _legend(
                [
                    ("committed", "#2459c6"),
                    ("abandoned (rolled back)", "#8a94a0"),
                    ("NaN", "var(--bad)"),
                ]
            )
        )
        parts.append('<div class="charts">')
        n_steps = timeline.n_steps
        for i, (name, points) in enumerate(sorted(pic.metrics.items())):
            parts.append(
                f'<div class="chart"><h3>{esc(name)}</h3>'
                f"{_metric_svg(name, points, n_steps, i)}</div>"
            )
        parts.append("</div>")
    else:
        parts.append('<p class="none">No metrics in this run.</p>')
    parts.append("</section>")

    # rules and findings
    parts.append('<section id="rules"><h2>Rules</h2><table><tr>')
    parts.append("<th>rule</th><th>name</th><th>result</th><th>checked</th>")
    parts.append("<th>errors</th><th>warnings</th></tr>")
    for r in report.results:
        status = rule_status(r, strict=False)
        parts.append(
            f'<tr id="rule-{esc(r.code)}"><td>{esc(r.code)}</td><td>{esc(r.name)}</td>'
            f'<td class="rule-{status}">{status}</td><td>{r.checked}</td>'
            f"<td>{r.errors}</td><td>{r.warnings}</td></tr>"
        )
    parts.append("</table></section>")
    parts.append('<section id="findings"><h2>Findings</h2>')
    if findings:
        parts.append('<ol class="findings">')
        for n, ((name, v), anchor) in enumerate(
            zip(findings[:MAX_FINDINGS], targets, strict=True), start=1
        ):
            where = location_text(v.location)
            exists = anchor is not None and anchor in timeline.anchors
            link = (
                f' <a href="#{esc(anchor)}" data-target="{esc(anchor)}">show on timeline</a>'
                if exists
                else ""
            )
            ids = ids_text(v)
            parts.append(
                f'<li id="v-{n}"><span class="code">{esc(v.code)} {esc(name)}</span> · '
                f"{esc(v.severity.value)}{link}"
                + (f'<div class="where">{esc(where)}</div>' if where else "")
                + (f'<div class="where">ids {esc(ids)}</div>' if ids else "")
                + f'<div class="msg">{esc(v.message)}</div></li>'
            )
        parts.append("</ol>")
        if len(findings) > MAX_FINDINGS:
            parts.append(f"<p>... and {len(findings) - MAX_FINDINGS} more.</p>")
    else:
        parts.append('<p class="none">No findings: every rule holds.</p>')
    parts.append("</section></main>")
    parts.append(f"<script>{JS}</script></body></html>")
    return "\n".join(parts) + "\n"
