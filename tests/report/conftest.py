"""Runs shared by the report tests (session scoped: tests only read them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.verifier import verify
from ftaudit.verifier.history import collect
from ftaudit.verifier.render.html import render_html
from tests.report.runs import write_clean_run, write_faulty_run


@pytest.fixture(scope="session")
def faulty_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Faults, a retry, a heal, a driver crash and a restart; every rule holds."""
    return write_faulty_run(tmp_path_factory.mktemp("faulty") / "run")


@pytest.fixture(scope="session")
def lossy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faulty run, but one sample of step 5 never reached cell 1 (FT004 fails)."""
    return write_faulty_run(tmp_path_factory.mktemp("lossy") / "run", lose_sample_at=6)


@pytest.fixture(scope="session")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same training without any fault."""
    return write_clean_run(tmp_path_factory.mktemp("clean") / "run")


@pytest.fixture(scope="session")
def faulty_page(faulty_run: Path) -> str:
    """The HTML report of the faulty run."""
    return render_html(collect(faulty_run), verify(faulty_run))


@pytest.fixture(scope="session")
def lossy_page(lossy_run: Path) -> str:
    """The HTML report of the run with a lost sample."""
    return render_html(collect(lossy_run), verify(lossy_run))
