"""A plain torchrun DDP job (2 processes, gloo) with a SIGKILL of one rank and a torchrun
restart verifies clean; the same script with each defect fails with the right rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ftaudit
from ftaudit.verifier import verify
from ftaudit.verifier.anchors import Anchors
from tests.support.torchrun import torchrun

pytestmark = [pytest.mark.slow, pytest.mark.torch]

SCRIPT = Path(__file__).with_name("torchrun_evidence.py")

EXPECTED = {
    "restore_skipped": ("FT009", "no restore evidence"),
    "checkpoint_late": ("FT010", "is not the state after step"),
    "zero_grad_skipped": ("FT011", "never cleared"),
    "stepped_twice": ("FT011", "applied twice"),
    "scheduler_not_restored": ("FT006", "stateful/lr_scheduler"),
    "head_frozen": ("FT012", "head.weight frozen"),
}


def _torchrun(run_dir: Path, *extra: str) -> None:
    """The script's launch, one planned restart (the SIGKILL of incarnation 0)."""
    torchrun(SCRIPT, str(run_dir), *extra, nproc=2, restarts=1)


def test_a_killed_and_restarted_ddp_job_verifies_clean(tmp_path: Path) -> None:
    _torchrun(tmp_path / "run")
    # the gate as CI runs it: a run that crashed and was never resumed to the end fails
    report = verify(tmp_path / "run", anchors=Anchors(require_finished=True))
    assert report.passed(), json.dumps(report.to_dict(), indent=1)
    checked = {r.code: r.checked for r in report.results}
    # the relaunch really resumed, and the new evidence was there to check
    assert all(checked[c] > 0 for c in ("FT009", "FT010", "FT011", "FT012")), checked
    with ftaudit.connect(tmp_path / "run") as con:
        starts = con.execute("SELECT count(DISTINCT incarnation) FROM run_started").fetchone()
    assert starts == (2,)  # the SIGKILL really restarted the job


@pytest.mark.parametrize("bug", sorted(EXPECTED))
def test_each_defect_fails_with_its_rule(tmp_path: Path, bug: str) -> None:
    _torchrun(tmp_path / "run", "--bug", bug)
    rule, symptom = EXPECTED[bug]
    report = verify(tmp_path / "run")
    (result,) = [r for r in report.results if r.code == rule]
    messages = [v.message for v in result.violations]
    assert any(symptom in m for m in messages), json.dumps(report.to_dict(), indent=1)
