"""Issue 14 item 1: a step retried 3+ times is a correct run (FT003 retry budget).

Real training (tiny transformer, two cells, Adam); the demo test runs the issue's
command on Ray.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit.verifier import verify
from tests.false_alarms.cells import Job, failures

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent
B = 64  # keep 44, B - keep = 20: one attempt of 8 ids fits, three do not


def _run(tmp_path: Path, *, clear: bool) -> Path:
    job = Job.start(tmp_path / "run", buffer_size=B)
    samples = 0
    for step in range(8):
        batch = range(samples, samples + 8)
        retries = {2: 3, 5: 5}.get(step, 0)  # 4 attempts of step 2, 6 of step 5
        for attempt in range(retries + 1):
            discard = attempt < retries
            if discard and not clear:
                # an older trainer: discards without zeroing the attempt's stale slots
                job.replicas[0].hooks.after_discard = lambda *a, **k: None  # type: ignore[method-assign]
                job.replicas[1].hooks.after_discard = lambda *a, **k: None  # type: ignore[method-assign]
            job.attempt(step, attempt, batch, discard=discard)
        samples += 8
    job.finish()
    return tmp_path / "run"


def test_steps_retried_four_and_six_times_verify(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, clear=True))
    assert report.passed(strict=True), failures(report)


def test_retries_without_clearing_are_over_budget(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, clear=False))
    ft003 = next(r for r in report.results if r.code == "FT003")
    kinds = {(v.location.step, v.location.attempt, v.kind) for v in ft003.violations}
    # step 2 still runs on the fresh (all-zero) ring; step 5's third attempt onwards
    # reaches slots last cleared after step 4
    assert kinds == {(5, a, "over_budget") for a in range(2, 6)}, failures(report)


def test_the_demo_with_a_step_retried_three_and_six_times_verifies(tmp_path: Path) -> None:
    """The command of the issue (step 4: three attempts), plus six attempts of step 6."""
    discards = [{"step": 4, "cell": 1, "attempt": 0}, {"step": 4, "cell": 0, "attempt": 1}]
    discards += [{"step": 6, "cell": a % 2, "attempt": a} for a in range(5)]
    faults = json.dumps({"faults": [], "discards": discards})
    env = {**os.environ, "NO_COLOR": "1"}
    proc = subprocess.run(
        [str(BIN / "ftaudit"), "demo", str(tmp_path / "run"), "--faults", faults],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "step 4 attempt 2" in proc.stderr and "step 6 attempt 5" in proc.stderr
    report = verify(tmp_path / "run")
    assert report.passed(strict=True), failures(report)
