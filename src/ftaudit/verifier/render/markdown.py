"""The Markdown report, sized for a CI step summary (``$GITHUB_STEP_SUMMARY``).

A verdict heading, a table of the rules, then the first violations as a list. Everything
that comes from the run (messages, paths, instance names) is escaped, so a message cannot
break the table or inject HTML into the page.
"""

from __future__ import annotations

import re

from ftaudit.verifier.findings import Report
from ftaudit.verifier.render.describe import (
    MAX_DETAILS,
    first_violations,
    hidden_text,
    ids_text,
    location_text,
    rule_status,
    seconds_text,
    summarize,
)

_STATUS = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail"}
_SPECIAL = re.compile(r"([\\`*_{}\[\]|~])")


def escape(text: str) -> str:
    """Text shown literally by GitHub-flavoured Markdown, also inside a table cell."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split())  # a newline would end the table row or the list item


def render_markdown(report: Report, *, strict: bool = False, max_violations: int = 10) -> str:
    """Verdict heading, rules table, first ``max_violations`` violations, counts of the rest."""
    summary = summarize(report, strict=strict)
    icon = "✅" if summary.passed else "❌"
    lines = [
        f"## {icon} ft-verify: {escape(summary.headline())}",
        "",
        f"Run directory: {escape(report.run_dir)}",
        "",
    ]
    if report.results:
        lines += [
            "| Rule | Name | Result | Checked | Errors | Warnings | Time |",
            "|---|---|---|---:|---:|---:|---:|",
        ]
        for r in report.results:
            status = _STATUS[rule_status(r, strict=strict)]
            lines.append(
                f"| {escape(r.code)} | {escape(r.name)} | {status} | {r.checked} "
                f"| {r.errors} | {r.warnings} | {seconds_text(r.seconds)} |"
            )
        lines.append("")
    shown, hidden = first_violations(report, max_violations)
    if shown:
        total = sum(len(r.violations) for r in report.results)
        lines += [f"### Violations ({len(shown)} of {total} shown)", ""]
        for result, v in shown:
            item = (
                f"- **{escape(v.code)} {escape(result.name)}** ({v.severity.value}, "
                f"`{escape(v.kind)}`)"
            )
            where = location_text(v.location)
            if where:
                item += f" at {escape(where)}"
            message = escape(v.message)
            item += f": {message}"
            ids = ids_text(v)
            if ids:
                item += f"{'' if message.endswith(('.', '!', '?')) else '.'} Ids: {escape(ids)}."
            lines.append(item)
            lines += [f"  - {escape(detail)}" for detail in v.details[:MAX_DETAILS]]
        if hidden:
            lines += ["", escape(hidden_text(hidden))]
        lines.append("")
    return "\n".join(lines)
