"""The report page: header, the timeline, coverage and metric sections, rules and findings,
assembled into one self-contained HTML document."""

from __future__ import annotations

from collections import defaultdict

from ftaudit.verifier.findings import Report, Severity, Violation
from ftaudit.verifier.history import RunHistory
from ftaudit.verifier.render.describe import (
    ids_text,
    location_text,
    plural,
    rule_status,
    summarize,
)
from ftaudit.verifier.render.html.assets import CSS, JS
from ftaudit.verifier.render.html.charts import coverage_svg, metric_svg
from ftaudit.verifier.render.html.svg import esc, legend
from ftaudit.verifier.render.html.timeline import Timeline

DASHED = "repeating-linear-gradient(45deg, #d7263d 0 2px, #fff 2px 4px)"
MAX_FINDINGS = 500
"""Findings listed on the page (the rest are counted)."""

Finding = tuple[str, Violation]
"""A violation with the name of the rule that found it."""


def violations(report: Report) -> list[Finding]:
    """Every violation, errors first."""
    return sorted(
        ((r.name, v) for r in report.results for v in r.violations),
        key=lambda nv: nv[1].severity is not Severity.ERROR,
    )


def render_html(pic: RunHistory, report: Report) -> str:
    """The whole page, as one string."""
    timeline = Timeline(pic)
    findings = violations(report)
    bad: dict[str, list[str]] = defaultdict(list)
    targets: list[str | None] = []
    for n, (_, v) in enumerate(findings[:MAX_FINDINGS]):
        anchor = timeline.target(v.location)
        targets.append(anchor)
        if anchor:
            bad[anchor].append(f"v-{n + 1}")
    timeline_svg = timeline.svg(bad)  # first: it records the anchors findings link to
    parts = [
        *_header(pic, report),
        *_timeline_section(timeline_svg),
        *_coverage_section(pic, findings),
        *_metrics_section(pic, timeline.n_steps),
        *_rules_section(report),
        *_findings_section(findings, targets, timeline.anchors),
        "</main>",
        f"<script>{JS}</script></body></html>",
    ]
    return "\n".join(parts) + "\n"


def _header(pic: RunHistory, report: Report) -> list[str]:
    summary = summarize(report, strict=False)
    facts = [
        plural(len(pic.incarnations), "incarnation"),
        plural(len(pic.committed_steps), "committed step"),
        plural(len(pic.attempts), "attempt"),
        f"{pic.retries()} retried",
        plural(len(pic.faults), "fault"),
        plural(sum(len(r.healed_cells) for r in pic.reconfigs), "heal"),
        plural(len(pic.checkpoints), "checkpoint"),
        plural(len(pic.cells), "cell"),
    ] + ([f"B={pic.buffer_size}"] if pic.buffer_size else [])
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ftaudit report: {esc(pic.run_dir)}</title>",
        f"<style>{CSS}</style></head><body>",
        "<header><h1>ftaudit report</h1>",
        f'<div class="run">{esc(pic.run_dir)}</div>',
        f'<div class="verdict {"pass" if summary.passed else "fail"}" id="verdict">'
        f"{esc(summary.headline())}</div>",
        f'<div class="facts">{esc(", ".join(facts))}</div></header><main>',
    ]


def _timeline_section(timeline_svg: str) -> list[str]:
    return [
        '<section id="timeline"><h2>Timeline</h2>',
        legend(
            [
                ("committed", "var(--ok)"),
                ("retried", "var(--retry)"),
                ("rolled back", "var(--abandon)"),
                ("unfinished (died mid-step)", DASHED),
                ("cell normal", "#9ed8b1"),
                ("cell discarded", "var(--retry)"),
                ("cell crashed", "#f4b4bc"),
                ("fault", "var(--bad)"),
                ("heal", "var(--heal)"),
                ("checkpoint / restore", "var(--ckpt)"),
            ]
        ),
        f'<div class="scroll">{timeline_svg}</div>',
        '<p class="none">Hover a mark for details. Steps run left to right; each '
        "incarnation has a lane of attempts (side by side when a step was retried) and a "
        "lane per cell. A red frame marks where a finding points.</p></section>",
    ]


def _coverage_section(pic: RunHistory, findings: list[Finding]) -> list[str]:
    parts = ['<section id="coverage"><h2>Witness coverage</h2>']
    if not pic.coverage:
        return [*parts, '<p class="none">No witness allocations in this run.</p>', "</section>"]
    flagged = {
        v.location.step for _, v in findings if v.code == "FT004" and v.location.step is not None
    }
    exact = sum(c.ok for c in pic.coverage)
    return [
        *parts,
        f"<p>Per committed step, the witness slots FT004 expects to be nonzero "
        f"(outline) against those seen (filled), summed over the snapshots of the normal "
        f"cells: {exact} of {plural(len(pic.coverage), 'step')} exact.</p>",
        legend(
            [
                ("seen and expected", "var(--ok)"),
                ("missing (gradient lost)", "var(--bad)"),
                ("extra (abandoned work leaked)", "var(--extra)"),
            ]
        ),
        f'<div class="scroll">{coverage_svg(pic, flagged)}</div>',
        "</section>",
    ]


def _metrics_section(pic: RunHistory, n_steps: int) -> list[str]:
    parts = ['<section id="metrics"><h2>Metrics</h2>']
    if not pic.metrics:
        return [*parts, '<p class="none">No metrics in this run.</p>', "</section>"]
    parts += [
        "<p>Committed history solid (the mean over the writers that logged the metric); "
        "stretches an incarnation trained and a later one rolled back dashed and faint; "
        "retried attempts as grey dots; NaN as a red cross.</p>",
        legend(
            [
                ("committed", "#2459c6"),
                ("abandoned (rolled back)", "#8a94a0"),
                ("NaN", "var(--bad)"),
            ]
        ),
        '<div class="charts">',
    ]
    for i, (name, points) in enumerate(sorted(pic.metrics.items())):
        parts.append(
            f'<div class="chart"><h3>{esc(name)}</h3>{metric_svg(name, points, n_steps, i)}</div>'
        )
    return [*parts, "</div>", "</section>"]


def _rules_section(report: Report) -> list[str]:
    parts = [
        '<section id="rules"><h2>Rules</h2><table><tr>',
        "<th>rule</th><th>name</th><th>result</th><th>checked</th>",
        "<th>errors</th><th>warnings</th></tr>",
    ]
    for r in report.results:
        status = rule_status(r, strict=False)
        parts.append(
            f'<tr id="rule-{esc(r.code)}"><td>{esc(r.code)}</td><td>{esc(r.name)}</td>'
            f'<td class="rule-{status}">{status}</td><td>{r.checked}</td>'
            f"<td>{r.errors}</td><td>{r.warnings}</td></tr>"
        )
    return [*parts, "</table></section>"]


def _findings_section(
    findings: list[Finding], targets: list[str | None], anchors: set[str]
) -> list[str]:
    parts = ['<section id="findings"><h2>Findings</h2>']
    if not findings:
        return [*parts, '<p class="none">No findings: every rule holds.</p>', "</section>"]
    parts.append('<ol class="findings">')
    for n, ((name, v), anchor) in enumerate(
        zip(findings[:MAX_FINDINGS], targets, strict=True), start=1
    ):
        where = location_text(v.location)
        link = (
            f' <a href="#{esc(anchor)}" data-target="{esc(anchor)}">show on timeline</a>'
            if anchor is not None and anchor in anchors
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
    return [*parts, "</section>"]
