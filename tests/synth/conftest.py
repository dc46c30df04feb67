"""Small synthetic runs shared by the synth tests (written once per session, read only)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.synth import SynthResult, synthesize
from tests.support.synth_runs import small_synth

SMALL = small_synth(
    16,
    ranks=2,
    buffer_size=512,
    samples_per_step=32,
    restarts=1,
    retries=2,
    checkpoint_every=4,
    flush_every=3,
    seed=7,
)
"""Restarts, retries, two ranks per cell: every path of the generator, in a second."""


@pytest.fixture(scope="session")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> SynthResult:
    return synthesize(tmp_path_factory.mktemp("synth") / "run", SMALL)


@pytest.fixture(scope="session")
def small_run_dir(small_run: SynthResult) -> Path:
    return small_run.run_dir
