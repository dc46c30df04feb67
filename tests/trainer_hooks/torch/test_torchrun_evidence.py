"""A plain torchrun DDP job (2 processes, gloo) with a SIGKILL of one rank and a torchrun
restart verifies clean; the same script with each defect fails with the right rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ftaudit
from ftaudit.verifier import verify
from ftaudit.verifier.anchors import Anchors
from tests.support.processes import run_group

pytestmark = [pytest.mark.slow, pytest.mark.torch]

SCRIPT = Path(__file__).with_name("torchrun_evidence.py")
ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 600  # about 70 s on a quiet 2-core machine; generous for a loaded one (load 30)

EXPECTED = {
    "restore_skipped": ("FT009", "no restore evidence"),
    "checkpoint_late": ("FT010", "is not the state after step"),
    "zero_grad_skipped": ("FT011", "never cleared"),
    "stepped_twice": ("FT011", "applied twice"),
    "scheduler_not_restored": ("FT006", "stateful/lr_scheduler"),
    "head_frozen": ("FT012", "head.weight frozen"),
}


def _torchrun(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        # workers sharing the agent's TCPStore can read the previous round's gloo
        # addresses after a restart and hang or fail to connect (pytorch#135712, #167288)
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
    }
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            "2", "--max-restarts", "1", str(SCRIPT), str(run_dir), *extra]  # fmt: skip
    return run_group(args, timeout=TIMEOUT_S, env=env, cwd=ROOT)


def test_a_killed_and_restarted_ddp_job_verifies_clean(tmp_path: Path) -> None:
    proc = _torchrun(tmp_path / "run")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
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
    proc = _torchrun(tmp_path / "run", "--bug", bug)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rule, symptom = EXPECTED[bug]
    report = verify(tmp_path / "run")
    (result,) = [r for r in report.results if r.code == rule]
    messages = [v.message for v in result.violations]
    assert any(symptom in m for m in messages), json.dumps(report.to_dict(), indent=1)
