"""torchrun, 2 gloo processes, DDP fed by ``DistributedSampler(shuffle=True)``: FT008 end to end.

One torchrun launch (one planned restart) of ``sampler_child.py`` per scenario, the three
started together: rank 1 is SIGKILLed inside step 7 of incarnation 0 (checkpoints after
steps 2 and 5), torchrun restarts both processes and ``DistributedRun`` resumes
incarnation 1 from checkpoint 5. Restoring the sampler's epoch and the
``StatefulDataLoader`` state verifies clean; forgetting ``set_epoch`` or building the
sampler with a new seed fails FT008 alone, naming the items.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ftaudit.eventlog import FaultInjected, read_records
from tests.support.torchrun import ROOT, command, environment, finished_after_restart

# the three launches share the first test's setup: a loaded machine (load 30 seen) needs time
pytestmark = [pytest.mark.slow, pytest.mark.torch, pytest.mark.timeout(1200)]

CHILD = Path(__file__).with_name("sampler_child.py")
STEPS, PER_STEP = 8, 6  # 2 ranks x 3 samples
VERIFY = "from ftaudit.cli.verify_cmd import main; main()"
BUGS = ("none", "epoch", "seed")
DEADLINE_S = 1000  # for all three together; about 60 s on a quiet 2-core machine


@dataclass(frozen=True)
class Launched:
    run_dir: Path
    returncode: int
    output: str


def _start(run_dir: Path, bug: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = command(CHILD, str(run_dir), bug, nproc=2, restarts=1)
    env = environment(PYTHONWARNINGS="ignore::UserWarning")  # torchdata's set_vital deprecation
    # output to a file (three launches at once would fill pipes nobody reads yet); a
    # session of its own, so a launch past the deadline is killed with its workers
    with log.open("wb") as out:
        return subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Launched]:
    root = tmp_path_factory.mktemp("sampler_ddp")
    procs = {bug: _start(root / bug, bug, root / f"{bug}.log") for bug in BUGS}
    deadline = time.monotonic() + DEADLINE_S
    done: dict[str, Launched] = {}
    for bug, proc in procs.items():
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            late = ""
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            late = f"\n[killed after {DEADLINE_S} s]"
        output = (root / f"{bug}.log").read_text(errors="replace") + late
        done[bug] = Launched(root / bug, proc.returncode, output)
    return done


def _restarted(launch: Launched) -> Path:
    """The launch's run, after checking that torchrun restarted it after the SIGKILL."""
    assert launch.returncode == 0, launch.output[-4000:]
    assert finished_after_restart(launch.output, "rank 0", 1), launch.output[-4000:]
    kills = [r for r in read_records(launch.run_dir) if isinstance(r.event, FaultInjected)]
    assert [(r.envelope.incarnation, r.event.step, r.event.mode) for r in kills] == [
        (0, 7, "sigkill")
    ]
    return launch.run_dir


def _verify(run_dir: Path) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-c", VERIFY, str(run_dir), "--format", "json"],
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return proc.returncode, json.loads(proc.stdout)


def _ft008(report: dict) -> dict:
    return next(r for r in report["results"] if r["code"] == "FT008")


def test_resumes_clean_after_a_sigkill_and_a_torchrun_restart(
    launched: dict[str, Launched],
) -> None:
    code, report = _verify(_restarted(launched["none"]))
    assert code == 0, json.dumps(report, indent=1)
    ft008 = _ft008(report)
    assert ft008["checked"] == STEPS * PER_STEP  # every committed sample
    assert ft008["note"].startswith("checked against dataset manifest")


@pytest.mark.parametrize(
    ("bug", "cause"),
    [
        ("epoch", "with epoch 0 instead of 1"),
        ("seed", "declared another order for epoch 1 than incarnation 0 (seed 18 instead of 17)"),
    ],
)
def test_a_sampler_state_not_restored_fails(
    launched: dict[str, Launched], bug: str, cause: str
) -> None:
    code, report = _verify(_restarted(launched[bug]))
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
