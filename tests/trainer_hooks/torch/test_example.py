"""The documented plain-PyTorch example runs, and ft-verify accepts the run it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.slow]
ROOT = Path(__file__).parents[3]


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
