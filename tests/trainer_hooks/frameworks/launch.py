"""Launch 2-process torchrun jobs for the framework tests, several at a time.

Most of a launch is importing torch and the framework, so the tests start independent
launches together and wait for all of them (with a generous timeout: the machine is
shared); a launch's exit code and output tail come back for the assertion messages.
:func:`clean_kill_resume` is the four launches every framework test makes.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tests.support.torchrun import ROOT, command, environment, store_not_made

TIMEOUT_S = 900


@dataclass(frozen=True)
class Launch:
    script: Path
    args: tuple[str, ...]
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
    env = environment(HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    out = log.open("wb")
    proc = subprocess.Popen(
        command(script, *args, nproc=2), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT
    )
    return Launch(script, args, proc, log, out)


def wait_all(*launches: Launch) -> list[Done]:
    """Wait for every launch; one that hangs past the timeout is killed (and fails). A
    launch whose store could not be made (nothing of the script ran) is made again, once."""
    done = []
    for launch in launches:
        ended = _wait(launch)
        if store_not_made(ended.returncode, ended.output):
            ended = _wait(torchrun(launch.script, *launch.args, log=launch.log))
        done.append(ended)
    return done


def _wait(launch: Launch) -> Done:
    try:
        launch.proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        launch.proc.kill()
        launch.proc.wait()
    launch.out.close()
    return Done(launch.proc.returncode, launch.log.read_text(errors="replace"))


@dataclass(frozen=True)
class Runs:
    """The four runs of :func:`clean_kill_resume` and how each launch ended."""

    clean: Path
    clean_done: Done
    killed_done: Done
    resumed: Path
    resumed_done: Done
    buggy: Path
    buggy_done: Done


def clean_kill_resume(child: Path, tmp: Path, *, out: str, bug_mode: str) -> Runs:
    """Launch ``child RUN_DIR OUT_DIR MODE`` four times, two at a time: a clean run
    (``fresh``) and one SIGKILLed inside step 5 (``kill@5``); then the killed run resumed
    (``resume``) and a copy of it resumed with the defect ``bug_mode``. ``out`` names the
    folder beside each run where the framework writes its own checkpoints."""
    clean, killed, buggy = tmp / "clean", tmp / "killed", tmp / "buggy"

    def launch(where: Path, mode: str, log: str) -> Launch:
        return torchrun(child, str(where / "run"), str(where / out), mode, log=tmp / log)

    first = wait_all(launch(clean, "fresh", "clean.log"), launch(killed, "kill@5", "kill.log"))
    shutil.copytree(killed, buggy)  # the same crashed run, resumed twice
    second = wait_all(launch(killed, "resume", "resume.log"), launch(buggy, bug_mode, "bug.log"))
    return Runs(
        clean / "run", first[0], first[1], killed / "run", second[0], buggy / "run", second[1]
    )
