"""Renderers of a verifier :class:`~ftaudit.verifier.findings.Report`: text, JSON, JUnit, Markdown.

Every renderer is a pure function from a report to a string, so the CLI decides where the
string goes (stdout or ``-o FILE``) and tests compare strings. Renderer modules are imported
on first use: the CLI's ``--help`` must not pay for rich or XML.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ftaudit.verifier.findings import Report

FORMATS: tuple[str, ...] = ("text", "json", "junit", "markdown")
"""The report formats, in the order the CLI lists them."""

__all__ = ["FORMATS", "render"]


def render(
    report: Report,
    fmt: str,
    *,
    strict: bool = False,
    color: bool = False,
    width: int = 100,
    max_violations: int = 10,
) -> str:
    """``report`` as a ``fmt`` document (one of :data:`FORMATS`).

    ``strict`` counts warnings as failures (as ``ft-verify --strict`` does); ``color`` and
    ``width`` apply to text only; ``max_violations`` is how many violations text and
    Markdown show in full before counting the rest (JSON and JUnit list them all).
    """
    if fmt == "text":
        from ftaudit.verifier.render.text import render_text

        return render_text(
            report, strict=strict, color=color, width=width, max_violations=max_violations
        )
    if fmt == "json":
        from ftaudit.verifier.render.json_report import render_json

        return render_json(report, strict=strict)
    if fmt == "junit":
        from ftaudit.verifier.render.junit import render_junit

        return render_junit(report, strict=strict)
    if fmt == "markdown":
        from ftaudit.verifier.render.markdown import render_markdown

        return render_markdown(report, strict=strict, max_violations=max_violations)
    raise ValueError(f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}")
