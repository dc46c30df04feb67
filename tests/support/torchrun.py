"""Launch a test script under torchrun (gloo processes on CPU) and return its output."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from tests.support.processes import run_group

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600
"""Generous: a launch takes seconds on a quiet 2-core machine, and a torchrun launch
outlived 150 s at load 30 on a shared one."""

SPARE_RESTARTS = 2
"""Restarts given beyond a launch's planned ones. Each torchrun round hands its workers a
port it found free and then let go; on a machine shared with other tests' servers and
connections, the port can be taken before rank 0's store binds it (``EADDRINUSE``), and
the round fails before the script runs. That round still spends a restart: with none
spare, the planned kill of incarnation 0 then ended the launch (1 of 36 launches under
load 3, and one ``make test`` in CI). A round that fails so claims no incarnation, so the
tests' own checks of incarnations and kills still see any other extra round."""

STORE_NOT_MADE = "torch.distributed.DistNetworkError"
"""A worker's c10d store could not be made (the port race of :data:`SPARE_RESTARTS`)."""


def store_not_made(returncode: int, output: str) -> bool:
    """Whether a launch failed because a worker's store could not be made: nothing of the
    script ran, and the launch is made again, once."""
    return returncode != 0 and STORE_NOT_MADE in output


def environment(**extra: str) -> dict[str, str]:
    """The environment of a torchrun launch: this checkout's ``src`` first, one thread."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "OMP_NUM_THREADS": "1",
        # workers sharing the agent's TCPStore can read the previous round's gloo
        # addresses after a restart and hang or fail to connect (pytorch#135712, #167288)
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        **extra,
    }


def command(script: Path, *args: str, nproc: int, restarts: int = 0) -> list[str]:
    """``torchrun --standalone`` of ``script ARGS`` on ``nproc`` local processes.

    ``restarts`` is how many restarts the script plans (one per kill it makes); a launch
    that plans any gets :data:`SPARE_RESTARTS` more. One that plans none gets none, so a
    crash the test makes ends the launch.
    """
    max_restarts = restarts + SPARE_RESTARTS if restarts else 0
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
        str(script), *args,
    ]  # fmt: skip


def torchrun(script: Path, *args: str, nproc: int, restarts: int = 0, **env: str) -> str:
    """Run ``script ARGS`` on ``nproc`` local processes; its stdout and stderr together.

    Fails the test (with the output's tail) when the launch fails or times out; a launch
    whose store could not be made (:data:`STORE_NOT_MADE`) is made again, once.
    """
    for _ in range(2):
        proc = run_group(
            command(script, *args, nproc=nproc, restarts=restarts),
            timeout=TIMEOUT_S,
            env=environment(**env),
            cwd=ROOT,
        )
        output = proc.stdout + proc.stderr
        if not store_not_made(proc.returncode, output):
            break
    assert proc.returncode == 0, f"torchrun {args}: exit {proc.returncode}\n{output[-4000:]}"
    return output


def finished_after_restart(output: str, job: str, restarts: int) -> bool:
    """Whether the script printed ``JOB incarnation 1 restart R done`` with R at least
    ``restarts``: incarnation 1 ended its training in a round torchrun restarted (R counts
    torchrun's rounds, a spare one included)."""
    done = re.findall(rf"{re.escape(job)} incarnation 1 restart (\d+) done", output)
    return any(int(r) >= restarts for r in done)
