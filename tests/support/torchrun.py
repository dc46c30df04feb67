"""Launch a test script under torchrun (gloo processes on CPU) and return its output."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tests.support.processes import run_group

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 600
"""Generous: a launch takes seconds on a quiet machine, and a torchrun launch outlived
150 s at load 30 on a shared 2-core one."""


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


def command(script: Path, *args: str, nproc: int, max_restarts: int = 0) -> list[str]:
    """``torchrun --standalone`` of ``script ARGS`` on ``nproc`` local processes."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts),
        str(script), *args,
    ]  # fmt: skip


STORE_NOT_MADE = ("DistNetworkError", "TCPStore::TCPStore")
"""A worker's c10d store could not be made: the port torchrun picked as free was taken
before the worker bound it, or not yet listening, on a machine shared with other tests'
servers (a torchrun launch failed so in one ``make test`` of 211 slow tests, and passed
again at once). Nothing of the script ran: the launch is made again, once."""


def torchrun(script: Path, *args: str, nproc: int, max_restarts: int = 0) -> str:
    """Run ``script ARGS`` on ``nproc`` local processes; its stdout and stderr together.

    Fails the test (with the output's tail) when the launch fails or times out; a launch
    whose store could not be made (:data:`STORE_NOT_MADE`) is made again, once.
    """
    for _ in range(2):
        proc = run_group(
            command(script, *args, nproc=nproc, max_restarts=max_restarts),
            timeout=TIMEOUT_S,
            env=environment(),
            cwd=ROOT,
        )
        output = proc.stdout + proc.stderr
        if proc.returncode == 0 or not all(s in output for s in STORE_NOT_MADE):
            break
    assert proc.returncode == 0, f"torchrun {args}: exit {proc.returncode}\n{output[-4000:]}"
    return output
