"""torchrun, 2 gloo processes, DDP fed by ``DistributedSampler(shuffle=True)``: FT008 end to end.

The first launch trains steps 0-6 and rank 1 SIGKILLs itself in step 7 (checkpoints
after steps 2 and 5). A second launch resumes from checkpoint 5: restoring the
sampler's epoch and the ``StatefulDataLoader`` state verifies clean; forgetting
``set_epoch`` or building the sampler with a new seed fails FT008, naming the items.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.torch]

CHILD = Path(__file__).with_name("sampler_child.py")
ROOT = Path(__file__).parents[3]
STEPS, KILL = 10, 7
VERIFY = "from ftaudit.cli.verify_cmd import main; main()"
LAUNCH_TIMEOUT_S = 300  # about 15 s on a quiet 2-core machine


def _launch(run_dir: Path, bug: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore::UserWarning",  # torchdata's set_vital deprecation
    }
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "--max-restarts", "0", str(CHILD), str(run_dir), str(STEPS), str(KILL), bug,
    ]  # fmt: skip
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S
    )


def _verify(run_dir: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-c", VERIFY, str(run_dir), "--format", "json"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Incarnation 0, SIGKILLed in step 7 after checkpoint 5 (shared: tests copy it)."""
    run_dir = tmp_path_factory.mktemp("ddp") / "run"
    first = _launch(run_dir, "none")
    assert first.returncode != 0, "rank 1 should have been SIGKILLed:\n" + first.stderr[-3000:]
    assert "exitcode  : -9" in first.stderr, first.stderr[-3000:]
    return run_dir


def _resumed(killed_run: Path, tmp_path: Path, bug: str) -> tuple[int, dict]:
    run_dir = tmp_path / "run"
    shutil.copytree(killed_run, run_dir)
    second = _launch(run_dir, bug)
    assert second.returncode == 0, second.stderr[-3000:]
    return _verify(run_dir)


def _ft008(report: dict) -> dict:
    return next(r for r in report["results"] if r["code"] == "FT008")


def test_resumes_clean_after_a_sigkill(killed_run: Path, tmp_path: Path) -> None:
    code, report = _resumed(killed_run, tmp_path, "none")
    assert code == 0, json.dumps(report, indent=1)
    ft008 = _ft008(report)
    assert ft008["checked"] == STEPS * 6  # every committed sample, 3 per rank per step
    assert ft008["note"].startswith("checked against dataset manifest")


@pytest.mark.parametrize(
    ("bug", "cause"),
    [
        ("epoch", "with epoch 0 instead of 1"),
        ("seed", "declared another order for epoch 1 than incarnation 0 (seed 18 instead of 17)"),
    ],
)
def test_a_sampler_state_not_restored_fails(
    killed_run: Path, tmp_path: Path, bug: str, cause: str
) -> None:
    code, report = _resumed(killed_run, tmp_path, bug)
    assert code == 1, json.dumps(report, indent=1)
    violations = _ft008(report)["violations"]
    messages = [v["message"] for v in violations]
    assert any(cause in m for m in messages), messages
    wrong = [v for v in violations if v["kind"] == "wrong_content"]
    assert wrong and all(v["location"]["incarnation"] == 1 for v in wrong)
    assert any(
        "should be item" in v["message"] and "its content is item" in v["message"] for v in wrong
    )
    others = [r for r in report["results"] if r["code"] != "FT008" and r["errors"]]
    assert not others, "only FT008 sees the data: " + json.dumps(others, indent=1)
