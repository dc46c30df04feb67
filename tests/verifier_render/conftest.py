"""Hand-built reports: the renderers are pure functions of a Report, so no run is needed."""

from __future__ import annotations

import pytest

from ftaudit.verifier.findings import Report
from tests.verifier_render.reports import MISSING, REPLAYED, rule


@pytest.fixture
def passing() -> Report:
    return Report(
        run_dir="/runs/ok",
        results=(rule("FT001", "log-integrity"), rule("FT004", "witness-exactly-once")),
    )


@pytest.fixture
def failing() -> Report:
    """FT004 fails with 12 errors, FT005 only warns, FT001 holds."""
    return Report(
        run_dir="/runs/bad",
        results=(
            rule("FT001", "log-integrity"),
            rule("FT004", "witness-exactly-once", *([MISSING] * 12)),
            rule("FT005", "sample-exactly-once", REPLAYED),
        ),
    )


@pytest.fixture
def warning_only() -> Report:
    return Report(
        run_dir="/runs/warn",
        results=(rule("FT001", "log-integrity"), rule("FT005", "sample-exactly-once", REPLAYED)),
    )
