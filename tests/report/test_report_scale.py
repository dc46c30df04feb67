"""A long run on one page: the page's size follows the incarnations, cells and metrics,
not the steps (``verifier/render/html/buckets.py``); lost work stays visible."""

from __future__ import annotations

import math
import re

from ftaudit.verifier.coverage import StepCoverage
from ftaudit.verifier.findings import Location, Report, RuleResult, Severity, Violation
from ftaudit.verifier.history import (
    AttemptInfo,
    CellState,
    CheckpointInfo,
    IncarnationInfo,
    MetricPoint,
    RunHistory,
)
from ftaudit.verifier.render.html import render_html
from ftaudit.verifier.render.html.buckets import MAX_COLUMNS

CELLS = (0, 1, 2, 3)


def _history(steps: int) -> RunHistory:
    """``steps`` committed steps over two incarnations: the first dies at 60% and the
    second resumes 50 steps earlier (an abandoned stretch), one retried step, one NaN."""
    crash, resume = int(steps * 0.6), int(steps * 0.6) - 50
    normal = tuple(CellState(c, "normal") for c in CELLS)
    attempts: list[AttemptInfo] = []
    metrics: list[MetricPoint] = []
    for step in range(crash + 1):
        status = "rolled_back" if step > resume else "committed"
        if step == crash:
            status = "unfinished"
        attempts.append(AttemptInfo(0, step, 0, status, normal))
        metrics.append(MetricPoint(0, step, 0, status, 1.0 / (step + 1), 4))
    for step in range(resume + 1, steps):
        attempt = 0
        if step == resume + 10:  # one retried step, a cell crashed in it
            crashed = (CellState(0, "errored"), *normal[1:])
            attempts.append(AttemptInfo(1, step, 0, "retried", crashed))
            attempt = 1
        attempts.append(AttemptInfo(1, step, attempt, "committed", normal))
        value = math.nan if step == steps - 7 else 1.0 / (step + 1)
        metrics.append(MetricPoint(1, step, attempt, "committed", value, 4))
    coverage = [
        StepCoverage(a.step, a.attempt, a.incarnation, 4, 64, 64 - (a.step == 5), a.step == 5, 0)
        for a in attempts
        if a.status == "committed"
    ]
    return RunHistory(
        run_dir="/runs/long",
        buffer_size=1 << 20,
        cells=CELLS,
        incarnations=[
            IncarnationInfo(0, None, None, 0, crash, "no end", True),
            IncarnationInfo(1, resume, 0, resume + 1, steps - 1, "completed", True),
        ],
        attempts=attempts,
        checkpoints=[
            CheckpointInfo(s, 0, (1,) if s == resume else ()) for s in range(0, crash, 100)
        ],
        metrics={"loss": metrics},
        coverage=coverage,
    )


def _report(step: int) -> Report:
    missing = Violation(
        "FT004",
        Severity.ERROR,
        "1 sample lost",
        Location(step=step, incarnation=0, attempt=0, cell=1),
    )
    return Report(
        "/runs/long",
        (RuleResult("FT004", "witness-exactly-once", 1, (missing,), 0.0),),
    )


def test_the_page_does_not_grow_with_the_steps() -> None:
    small = render_html(_history(1_000), _report(5))
    large = render_html(_history(20_000), _report(5))
    assert len(large) < 1.3 * len(small), (len(small), len(large))
    assert len(large) < 1_000_000
    # one attempt box per incarnation and column, not one per attempt
    assert large.count('class="att ') <= 2 * MAX_COLUMNS


def test_lost_work_stays_visible_in_buckets() -> None:
    page = render_html(_history(20_000), _report(5))
    # the stretch the second incarnation rolled back, the dying step, the retry and the crash
    assert re.search(r'class="att rolled_back" id="t-i0-b\d+"', page)
    assert re.search(r'class="att unfinished" id="t-i0-b\d+"', page)
    assert re.search(r'class="att retried" id="t-i1-b\d+"', page)
    assert re.search(r'class="cell errored faint" id="t-i1-b\d+-c0"', page)
    assert "1 retried" in page  # the bucket's tooltip counts its attempts
    assert 'class="m-abandoned"' in page and 'class="m-nan"' in page
    assert 'class="cov-missing"' in page


def test_a_finding_links_to_its_bucket() -> None:
    page = render_html(_history(20_000), _report(5))
    # step 5 lies in the first bucket; cell 1 of incarnation 0 there
    assert 'data-target="t-i0-b0-c1"' in page
    assert 'id="t-i0-b0-c1" x=' in page and "data-finding" in page
