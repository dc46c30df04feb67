"""A disk that never heals: the writer's losses are told loudly, and the run does not verify.

Under fail-open, a run whose disk failed for good lost most of its events and its
``run_finished`` silently, and every ``ft-verify`` exited 0. Now the writer reports its
losses at exit on stderr and in a last-chance record in a fallback directory, and FT001
fails the run for them (``--require-finished`` too, for the missing end). The outage is
real: ``RLIMIT_FSIZE`` (EFBIG) in the training process, never lifted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ftaudit.eventlog.lost_events import LostEvents
from tests.support.cli import Invoke, check_exit

ROOT = Path(__file__).resolve().parents[2]
STEPS, PER_STEP = 30, 200


def _train_on_a_dying_disk(run_dir: Path, fallback: Path) -> tuple[dict, str]:
    never = str(STEPS + 1)
    args = ["--outage", "fsize", "--steps", str(STEPS), "--per-step", str(PER_STEP)]
    args += ["--break-at", "10", "--heal-at", never, "--max-buffered", "1000"]
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.disk_child", str(run_dir), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "FTAUDIT_FALLBACK_DIR": str(fallback)},
        timeout=300,
    )
    assert done.returncode == 0, done
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def test_a_disk_that_never_heals(
    ftaudit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run, fallback = tmp_path / "run", tmp_path / "fallback"
    out, stderr = _train_on_a_dying_disk(run, fallback)
    assert out["error"] is None  # fail-open: training went on

    loud = [line for line in stderr.splitlines() if line.startswith("ftaudit: LOST")]
    assert len(loud) == 2, stderr  # the trainer's, and the driver's (its run_finished too)
    path = next(fallback.glob(f"*/{out['writer']}.json"))
    record = LostEvents.model_validate_json(path.read_text())
    assert any(str(path) in line for line in loud)
    assert record.logged == STEPS * PER_STEP
    assert record.lost == record.logged - 1 - record.durable_seq  # every unsealed event
    assert record.lost >= (STEPS - 10) * PER_STEP

    verdict = ftaudit("verify", run, "-f", "json", "--rule", "FT001", "--fallback-dir", fallback)
    check_exit(verdict, 1)
    kinds = [v["kind"] for r in json.loads(verdict.stdout)["results"] for v in r["violations"]]
    assert "events_lost" in kinds

    # the record is found where the writer put it by default too (the same environment)
    monkeypatch.setenv("FTAUDIT_FALLBACK_DIR", str(fallback))
    check_exit(ftaudit("verify", run, "--rule", "FT001"), 1)
    for lost in fallback.glob("*/*.json"):
        lost.unlink()  # without the records, only --require-finished sees the missing end
    check_exit(ftaudit("verify", run, "--rule", "FT001"), 0)
    check_exit(ftaudit("verify", run, "--rule", "FT001", "--require-finished"), 1)
