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
import time
from pathlib import Path
from typing import TYPE_CHECKING

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


def _run_job(cfg: DemoConfig, env: dict[str, str]) -> int:
    """One launch of the job; its progress is forwarded to stderr without Ray's kill notices."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ftaudit.demo.job", cfg.to_json()],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if not any(noise in line for noise in EXPECTED_NOISE) and line.strip():
            sys.stderr.write(line)
            sys.stderr.flush()
    return proc.wait()


def run_training(cfg: DemoConfig, *, max_incarnations: int = 4) -> int:
    """Run the job until it finishes; relaunch it after each SIGKILL. Returns the launches."""
    import ray

    address = _start_ray(cfg)
    # RUST_LOG: torchft's lighthouse (in the job) logs every quorum tick at INFO
    env = {"RUST_LOG": "warn", **os.environ, "RAY_ADDRESS": address, "PYTHONUNBUFFERED": "1"}
    try:
        for launch in range(1, max_incarnations + 1):
            returncode = _run_job(cfg, env)
            if returncode == 0:
                return launch
            if returncode != -signal.SIGKILL:
                raise DemoError(f"the training job failed with exit status {returncode}")
            say(
                "[demo] the training job was killed (SIGKILL); restarting it from the "
                "latest checkpoint"
            )
        raise DemoError(f"the training job was killed {max_incarnations} times; giving up")
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
