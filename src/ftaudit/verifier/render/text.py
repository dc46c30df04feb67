"""The terminal report: a table of the rules, then the first violations in full.

Built with rich so that it reads well in a terminal, yet renders to a plain string: with
``color=False`` there is not one escape code in it (pipes, files, ``NO_COLOR``).
"""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from ftaudit.console import string_console
from ftaudit.verifier.findings import Report, Severity
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

_STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}
_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow"}


def _rules_table(report: Report, *, strict: bool) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("rule", no_wrap=True)
    table.add_column("name")
    table.add_column("result", no_wrap=True)
    for header in ("checked", "errors", "warnings", "time"):
        table.add_column(header, justify="right", no_wrap=True)
    for result in report.results:
        status = rule_status(result, strict=strict)
        table.add_row(
            result.code,
            Text(result.name),
            Text(status, style=_STATUS_STYLE[status]),
            str(result.checked),
            Text(str(result.errors), style="red" if result.errors else ""),
            Text(str(result.warnings), style="yellow" if result.warnings else ""),
            seconds_text(result.seconds),
        )
    return table


def render_text(
    report: Report,
    *,
    strict: bool = False,
    color: bool = False,
    width: int = 100,
    max_violations: int = 10,
) -> str:
    """The report for a person: rules table, first ``max_violations`` in full, verdict last."""
    console, out = string_console(color=color, width=width)
    summary = summarize(report, strict=strict)
    console.print(Text(f"ftaudit verify {report.run_dir}", style="bold"))
    if report.results:
        console.print(_rules_table(report, strict=strict))
        for result in report.results:
            if result.note:
                console.print(
                    Text(f"{result.code} note: {result.note}", style="dim"), soft_wrap=True
                )
    shown, hidden = first_violations(report, max_violations)
    total = sum(len(r.violations) for r in report.results)
    if shown:
        if total == 1:
            title = "Violation"
        elif len(shown) == total:
            title = f"Violations ({total})"
        else:
            title = f"Violations (first {len(shown)} of {total})"
        console.print()
        console.print(Text(title, style="bold"))
        for n, (result, violation) in enumerate(shown, start=1):
            console.print()
            number = f"{n}. "
            indent = " " * len(number)
            head = Text(number)
            head.append(f"{violation.code} {result.name}", style="bold")
            head.append(" · ")
            head.append(violation.severity.value, style=_SEVERITY_STYLE[violation.severity])
            head.append(f" · {violation.kind}")
            console.print(head, soft_wrap=True)
            where = location_text(violation.location)
            if where:
                console.print(Text(f"{indent}{where}"), soft_wrap=True)
            ids = ids_text(violation)
            if ids:
                console.print(Text(f"{indent}ids {ids}"), soft_wrap=True)
            console.print(Text(f"{indent}{violation.message}"), soft_wrap=True)
            for detail in violation.details[:MAX_DETAILS]:
                console.print(Text(f"{indent}  - {detail}"), soft_wrap=True)
            if len(violation.details) > MAX_DETAILS:
                more = len(violation.details) - MAX_DETAILS
                console.print(Text(f"{indent}  ... and {more} more"), soft_wrap=True)
        if hidden:
            console.print()
            console.print(Text(hidden_text(hidden)), soft_wrap=True)
        console.print()
    verdict_style = "bold green" if summary.passed else "bold red"
    console.print(Text(summary.headline(), style=verdict_style), soft_wrap=True)
    return out.getvalue()
