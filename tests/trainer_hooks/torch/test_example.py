"""The documented examples run (plain PyTorch; torchrun DDP), and ft-verify accepts their runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ftaudit
from ftaudit.verifier import verify
from tests.support.torchrun import torchrun

pytestmark = pytest.mark.torch
ROOT = Path(__file__).parents[3]


@pytest.mark.slow
def test_example_runs_and_verifies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    example = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "torch_loop.py"), str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert example.returncode == 0, example.stderr
    assert example.stdout.count("chunk0.head") == 4, example.stdout
    verify = subprocess.run(
        [str(Path(sys.executable).with_name("ft-verify")), str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr


DDP_EXAMPLE = ROOT / "examples" / "torchrun_ddp.py"
MARK = re.compile(r"\S  # ftaudit(:|$)")
"""A code line that ftaudit adds ends in a ``# ftaudit`` comment."""


def _added_lines(text: str) -> list[str]:
    return [line.split("  # ftaudit")[0].strip() for line in text.splitlines() if MARK.search(line)]


def test_torchrun_example_adds_few_lines_and_matches_the_readme() -> None:
    added = _added_lines(DDP_EXAMPLE.read_text())
    assert len(added) <= 15, added
    readme = (ROOT / "README.md").read_text()
    shown = _added_lines(readme.split("### 1. Hooks in a torchrun DDP script")[1].split("###")[0])
    assert shown == added  # the README shows the script's own lines
    assert f"({len(added)}, counted by a test)" in readme


@pytest.mark.slow
def test_torchrun_example_runs_and_verifies(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    torchrun(DDP_EXAMPLE, str(run_dir), nproc=2)
    report = verify(run_dir)
    assert report.passed(), [v.message for r in report.results for v in r.violations]
    # DDP: every rank is its own cell, compared with rank 0 after each step
    with ftaudit.connect(run_dir) as con:
        cells = con.sql("SELECT DISTINCT cell, rank FROM trainer_weight_checksum").fetchall()
    assert sorted(cells) == [(0, 0), (1, 0)]
