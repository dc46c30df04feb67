"""The demo's entry: start Ray, run the job (killed and relaunched as the schedule says), verify.

The job runs as a subprocess in its own process group, so a SIGKILL really ends the
whole driver process; its Ray actors die with their owner. The Ray cluster belongs to
this process and outlives the job's incarnations, as a real cluster outlives a job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from ftaudit.demo.config import DemoConfig
from ftaudit.demo.talk import say
from ftaudit.errors import (
    DemoError,
)

if TYPE_CHECKING:
    from ftaudit.verifier import Report


def new_run_dir() -> Path:
    """A fresh directory for a run (printed, so the user can inspect it afterwards)."""
    return Path(tempfile.mkdtemp(prefix="ftaudit-demo-"))


def _start_ray(cfg: DemoConfig) -> str:
    import ray

    try:
        ray.init(
            num_cpus=cfg.cells + 2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
        )
    except Exception as exc:  # Ray's start-up errors have no common class
        # e.g. the node not registering with its GCS within Ray's 30 s on a loaded machine:
        # the machine's trouble, not a bug of ftaudit's to report
        raise DemoError(f"Ray did not start: {type(exc).__name__}: {exc}") from exc
    return ray.get_runtime_context().gcs_address


EXPECTED_NOISE = (
    "A worker died or was killed while executing a task",
    "Token authentication is enabled",
)
"""Ray's messages about the workers the schedule kills on purpose: dropped from the output."""


RESTART_EXIT = 75
"""The job's exit status when it lost every cell (EX_TEMPFAIL): restart it from the
newest checkpoint, as after a SIGKILL."""


TALK_FD_ENV = "FTAUDIT_DEMO_TALK_FD"
"""The job's progress pipe: Ray and torchft print from their own threads on the job's
stdout and stderr, and a line of theirs can land inside a progress line sharing them."""


def _run_job(cfg: DemoConfig, env: dict[str, str]) -> int:
    """One launch of the job; its progress and its other output (without Ray's kill
    notices) are forwarded to stderr."""
    talk_read, talk_write = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ftaudit.demo.job", cfg.to_json()],
        env={**env, TALK_FD_ENV: str(talk_write)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        pass_fds=(talk_write,),
    )
    os.close(talk_write)  # the job holds the only writer: its exit ends the talk
    assert proc.stdout is not None
    other = threading.Thread(target=_forward, args=(proc.stdout, True), daemon=True)
    other.start()
    with open(talk_read, encoding="utf-8") as talk:
        _forward(talk, False)
    other.join()
    return proc.wait()


def _forward(lines: IO[str], drop_noise: bool) -> None:
    for line in lines:
        if line.strip() and not (drop_noise and any(n in line for n in EXPECTED_NOISE)):
            sys.stderr.write(line)  # one write per line: the two forwarders never interleave
            sys.stderr.flush()


def run_training(cfg: DemoConfig, *, max_incarnations: int = 4) -> int:
    """Run the job until it finishes; relaunch it after each SIGKILL or loss of every cell.
    Returns the launches."""
    import ray

    address = _start_ray(cfg)
    # RUST_LOG: torchft's lighthouse (in the job) logs every quorum tick at INFO
    env = {"RUST_LOG": "warn", **os.environ, "RAY_ADDRESS": address, "PYTHONUNBUFFERED": "1"}
    try:
        for launch in range(1, max_incarnations + 1):
            returncode = _run_job(cfg, env)
            if returncode == 0:
                return launch
            if returncode not in (-signal.SIGKILL, RESTART_EXIT):
                raise DemoError(f"the training job failed with exit status {returncode}")
            why = "was killed (SIGKILL)" if returncode < 0 else "lost every cell"
            say(f"[demo] the training job {why}; restarting it from the latest checkpoint")
        raise DemoError(f"the training job ended {max_incarnations} times; giving up")
    finally:
        ray.shutdown()


def run_demo(cfg: DemoConfig) -> Report:
    """Train with the configured faults and bug, then verify the run directory."""
    from ftaudit.verifier import verify

    started = time.perf_counter()
    Path(cfg.run_dir).mkdir(parents=True, exist_ok=True)
    say(f"[demo] run directory: {cfg.run_dir}")
    launches = run_training(cfg)
    say(
        f"[demo] training done in {time.perf_counter() - started:.0f}s "
        f"({launches} incarnation(s)); verifying"
    )
    return verify(cfg.run_dir)
