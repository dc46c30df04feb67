"""Launching processes from tests: process trees (torchrun and its ranks) without leaving
orphans, commands a test presses Ctrl-C in, and the benchmark scripts (run, or loaded as
modules)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType


def run_group(
    args: Sequence[str], *, timeout: float, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in a new session and capture its output; on timeout, SIGKILL the
    whole process group and fail with the output so far.

    ``subprocess.run(timeout=)`` kills only the launcher: torchrun's ranks would live on
    (a rank stuck at exit keeps a core busy for the rest of the session).
    """
    proc = subprocess.Popen(
        args,
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(
            f"{' '.join(args)} timed out after {timeout:.0f} s\n{out[-3000:]}{err[-3000:]}"
        ) from None
    return subprocess.CompletedProcess(list(args), proc.returncode, out, err)


def as_foreground_job() -> None:
    """``preexec_fn`` for a command a test stops with SIGINT: Ctrl-C reaches it as it would a
    terminal's foreground job.

    When the tests themselves run as a shell's background job (``pytest ... &``), their
    children inherit SIGINT ignored, and ftaudit rightly leaves an ignored Ctrl-C alone:
    without this the test would measure how it was launched, not the command.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(script: str, args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/<script>`` on this checkout's ``src`` (a benchmark's tiny-size
    test); fail with its output unless it exits 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [sys.executable, str(ROOT / "benchmarks" / script), *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def load_benchmark(script: str) -> ModuleType:
    """``benchmarks/<script>`` imported as a module named after its file, to test its
    functions; registered in ``sys.modules`` first: dataclasses (and pickling) look their
    module up by name."""
    path = ROOT / "benchmarks" / script
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
