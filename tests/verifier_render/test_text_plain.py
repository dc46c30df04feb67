"""The plain text report (no rich) is byte for byte the one rich writes without colour."""

from __future__ import annotations

import pytest

from ftaudit.verifier.findings import Report
from ftaudit.verifier.render.text import render_text
from tests.verifier_render.random_reports import random_report

WIDTHS = (20, 60, 100)


def _by_rich(report: Report, width: int, *, strict: bool) -> str:
    """What rich alone writes: a colourless rendering forced through rich."""
    from ftaudit.verifier.render import text

    summary = text.summarize(report, strict=strict)
    title = f"ftaudit verify {report.run_dir}"
    rows = text._rows(report, strict=strict)
    body = text._body(report, summary, strict=strict, max_violations=10)
    return text._rich(title, rows, body, color=False, width=width)


@pytest.mark.parametrize("seed", range(45))
def test_plain_text_is_what_rich_writes(seed: int) -> None:
    report, strict = random_report(seed), seed % 2 == 1
    for width in WIDTHS:
        assert render_text(report, width=width, strict=strict) == _by_rich(
            report, width, strict=strict
        ), (seed, width)


def _plain(report: Report, width: int) -> str | None:
    from ftaudit.verifier.render import text

    summary = text.summarize(report, strict=False)
    rows = text._rows(report, strict=False)
    body = text._body(report, summary, strict=False, max_violations=10)
    return text._plain(f"ftaudit verify {report.run_dir}", rows, body, width)


def test_ordinary_reports_do_not_need_rich(failing: Report, passing: Report) -> None:
    assert _plain(failing, 100) is not None and _plain(passing, 100) is not None
    # the comparison above holds the plain text to rich's on many reports, not a few
    plain = sum(_plain(random_report(seed), w) is not None for seed in range(45) for w in WIDTHS)
    assert plain >= 25
