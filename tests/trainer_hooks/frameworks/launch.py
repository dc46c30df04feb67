"""Launch 2-process torchrun jobs for the framework tests, several at a time.

Most of a launch is importing torch and the framework, so the tests start independent
launches together and wait for all of them (with a generous timeout: the machine is
shared); a launch's exit code and output tail come back for the assertion messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[3]
TIMEOUT_S = 900


@dataclass(frozen=True)
class Launch:
    proc: subprocess.Popen[bytes]
    log: Path
    out: IO[bytes]


@dataclass(frozen=True)
class Done:
    returncode: int
    output: str

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def torchrun(script: Path, *args: str, log: Path) -> Launch:
    """Start ``torchrun --standalone --nproc-per-node 2 script args`` (a free port each)."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONWARNINGS": "ignore",
    }
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    out = log.open("wb")
    proc = subprocess.Popen(
        [*cmd, str(script), *args], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT
    )
    return Launch(proc, log, out)


def wait_all(*launches: Launch) -> list[Done]:
    """Wait for every launch; one that hangs past the timeout is killed (and fails)."""
    done = []
    for launch in launches:
        try:
            launch.proc.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            launch.proc.kill()
            launch.proc.wait()
        launch.out.close()
        done.append(Done(launch.proc.returncode, launch.log.read_text(errors="replace")))
    return done
