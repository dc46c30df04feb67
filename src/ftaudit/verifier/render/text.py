"""The terminal report: a table of the rules, then the first violations in full.

Built as lines of styled spans, then written out by rich so that it reads well in a
terminal, yet renders to a plain string: with ``color=False`` there is not one escape
code in it (pipes, files, ``NO_COLOR``). A gate runs ``ft-verify`` after every step and
rich costs it about 20 ms of CPU to import and lay out, so a plain report whose every
line fits as it is (printable ASCII, a title and a table no wider than the page: nothing
for rich to wrap, crop, expand or strip) is written by :func:`_plain` instead, to the
same bytes (``tests/verifier_render/test_text_plain.py`` holds the two to that); any
other report, and every coloured one, is rich's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ftaudit.verifier.findings import Report, Severity
from ftaudit.verifier.render.describe import (
    MAX_DETAILS,
    Summary,
    first_violations,
    hidden_text,
    ids_text,
    location_text,
    rule_status,
    seconds_text,
    summarize,
)

if TYPE_CHECKING:
    from rich.text import Text

Span = tuple[str, str]
"""A piece of a line and its rich style (``""``: none)."""

Line = tuple[tuple[Span, ...], bool]
"""One printed line and whether rich may wrap it (headings) or prints it as it is however
long (``soft_wrap``: messages, details); the empty line is ``((), False)``."""

BLANK: Line = ((), False)

Cell = tuple[str, str | None]
"""A table cell: its text and style (``None``: given to rich as a plain string)."""

HEADERS = ("rule", "name", "result", "checked", "errors", "warnings", "time")
RIGHT = frozenset({"checked", "errors", "warnings", "time"})
"""Columns justified right (the counts and the time)."""
WRAPS = frozenset({"name"})
"""Columns rich may wrap when the table is wider than the page."""

_STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}
_SEVERITY_STYLE = {Severity.ERROR: "red", Severity.WARNING: "yellow"}
_AS_IS = re.compile(r"[ -~·]*")
"""Text that prints as it is, one column per character: printable ASCII and the middle dot
of the violation headings (no tab to expand, no control code to strip, no wide character)."""


def _rows(report: Report, *, strict: bool) -> list[tuple[Cell, ...]]:
    rows = []
    for result in report.results:
        status = rule_status(result, strict=strict)
        rows.append(
            (
                (result.code, None),
                (result.name, ""),
                (status, _STATUS_STYLE[status]),
                (str(result.checked), None),
                (str(result.errors), "red" if result.errors else ""),
                (str(result.warnings), "yellow" if result.warnings else ""),
                (seconds_text(result.seconds), None),
            )
        )
    return rows


def _body(report: Report, summary: Summary, *, strict: bool, max_violations: int) -> list[Line]:
    """The lines after the table: rule notes, the first violations, the verdict."""
    lines: list[Line] = [
        (((f"{result.code} note: {result.note}", "dim"),), False)
        for result in report.results
        if result.note
    ]
    shown, hidden = first_violations(report, max_violations)
    total = sum(len(r.violations) for r in report.results)
    if shown:
        if total == 1:
            title = "Violation"
        elif len(shown) == total:
            title = f"Violations ({total})"
        else:
            title = f"Violations (first {len(shown)} of {total})"
        lines += [BLANK, (((title, "bold"),), True)]
        for n, (result, violation) in enumerate(shown, start=1):
            number = f"{n}. "
            indent = " " * len(number)
            head = (
                (number, ""),
                (f"{violation.code} {result.name}", "bold"),
                (" · ", ""),
                (violation.severity.value, _SEVERITY_STYLE[violation.severity]),
                (f" · {violation.kind}", ""),
            )
            lines += [BLANK, (head, False)]
            where = location_text(violation.location)
            if where:
                lines.append((((f"{indent}{where}", ""),), False))
            ids = ids_text(violation)
            if ids:
                lines.append((((f"{indent}ids {ids}", ""),), False))
            lines.append((((f"{indent}{violation.message}", ""),), False))
            lines += [(((f"{indent}  - {d}", ""),), False) for d in violation.details[:MAX_DETAILS]]
            if len(violation.details) > MAX_DETAILS:
                more = len(violation.details) - MAX_DETAILS
                lines.append((((f"{indent}  ... and {more} more", ""),), False))
        if hidden:
            lines += [BLANK, (((hidden_text(hidden), ""),), False)]
        lines.append(BLANK)
    verdict = (summary.headline(), "bold green" if summary.passed else "bold red")
    lines.append(((verdict,), False))
    return lines


def render_text(
    report: Report,
    *,
    strict: bool = False,
    color: bool = False,
    width: int = 100,
    max_violations: int = 10,
) -> str:
    """The report for a person: rules table, first ``max_violations`` in full, verdict last."""
    summary = summarize(report, strict=strict)
    title = f"ftaudit verify {report.run_dir}"
    rows = _rows(report, strict=strict)
    body = _body(report, summary, strict=strict, max_violations=max_violations)
    plain = None if color else _plain(title, rows, body, width)
    return plain if plain is not None else _rich(title, rows, body, color=color, width=width)


def _plain(title: str, rows: list[tuple[Cell, ...]], body: list[Line], width: int) -> str | None:
    """The report as rich writes it without colour, or None when rich would change a line
    (wrap the title or the table, expand a tab, strip a control code, count a wide
    character as two columns)."""
    texts = [title, *(t for row in rows for t, _ in row), *(t for ln, _ in body for t, _ in ln)]
    wrapped = [title, *("".join(t for t, _ in ln) for ln, wraps in body if wraps)]
    if any(len(t) > width for t in wrapped) or not all(_AS_IS.fullmatch(t) for t in texts):
        return None
    out = [title]
    if rows:
        table = _plain_table(rows, width)
        if table is None:
            return None
        out += table
    out += ["".join(text for text, _ in line) for line, _ in body]
    return "\n".join(out) + "\n"


def _plain_table(rows: list[tuple[Cell, ...]], width: int) -> list[str] | None:
    """rich's ``box.SIMPLE_HEAD`` table without edges or edge padding (one space each side
    of a cell, one between columns, a rule under the header), or None when it is wider
    than ``width`` (rich would wrap the name column)."""
    last = len(HEADERS) - 1
    content = [max(len(h), *(len(row[i][0]) for row in rows)) for i, h in enumerate(HEADERS)]
    # a cell's padding: one space left and right, none at the table's outer edges
    widths = [c + (i > 0) + (i < last) for i, c in enumerate(content)]
    if sum(widths) + last > width:
        return None

    def line(cells: tuple[str, ...]) -> str:
        parts = []
        for i, (text, header) in enumerate(zip(cells, HEADERS, strict=True)):
            fitted = text.rjust(content[i]) if header in RIGHT else text.ljust(content[i])
            parts.append(" " * (i > 0) + fitted + " " * (i < last))
        return " ".join(parts)

    return [
        line(HEADERS),
        "─" * (sum(widths) + last),
        *(line(tuple(text for text, _ in row)) for row in rows),
    ]


def _rich(
    title: str, rows: list[tuple[Cell, ...]], body: list[Line], *, color: bool, width: int
) -> str:
    from rich import box
    from rich.table import Table

    from ftaudit.console import string_console

    console, out = string_console(color=color, width=width)
    console.print(_text(((title, "bold"),)))
    if rows:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for header in HEADERS:
            table.add_column(
                header,
                justify="right" if header in RIGHT else "left",
                no_wrap=header not in WRAPS,
            )
        for row in rows:
            table.add_row(
                *(text if style is None else _text(((text, style),)) for text, style in row)
            )
        console.print(table)
    for line, wraps in body:
        if not line:
            console.print()
        elif wraps:
            console.print(_text(line))
        else:
            console.print(_text(line), soft_wrap=True)
    return out.getvalue()


def _text(line: tuple[Span, ...]) -> Text:
    from rich.text import Text

    (first, style), *rest = line
    text = Text(first, style=style)  # as the report was always built: a line's own style
    for piece, more in rest:
        text.append(piece, style=more)
    return text
