"""``ft-verify --follow`` against a run that another process is writing.

The writer (``tests.support.live_writer``) stops half-way until the test creates its
gate file; the test creates it only once the followers said what they judged of the
half-written run, so nothing here depends on timing: every wait is on a counted
condition, with a generous timeout for a loaded machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftaudit.cli.follow import follow
from ftaudit.cli.verify_cmd import build_app
from ftaudit.synth import synthesize
from ftaudit.verifier.anchors import NO_ANCHORS
from ftaudit.verifier.pacing import CpuShare
from tests.support.cli import check_exit
from tests.support.processes import as_foreground_job
from tests.support.synth_runs import small_synth

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
LIVE_WRITER = [sys.executable, "-m", "tests.support.live_writer"]
TIMEOUT_S = 300.0


class _Lines:
    """A process's stderr, read line by line on a thread; waits for a line to appear."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        assert proc.stderr is not None
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()

    def wait_for(self, needle: str) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        with self._cond:
            while True:
                for line in self.lines:
                    if needle in line:
                        return line
                left = deadline - time.monotonic()
                assert left > 0, f"never said {needle!r}:\n{''.join(self.lines)}"
                self._cond.wait(timeout=left)

    def text(self) -> str:
        """Everything said, once the stream ended (the process exited)."""
        self._thread.join(timeout=TIMEOUT_S)
        return "".join(self.lines)


def _follower(run_dir: Path, stdout: Path, *args: str) -> subprocess.Popen[str]:
    # stdout to a file: stderr is read line by line, and nothing else may read it
    with stdout.open("w") as out:
        return subprocess.Popen(
            [str(BIN / "ft-verify"), "--follow", "--interval", "0.1", *args, str(run_dir)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            preexec_fn=as_foreground_job,
        )


def _without_timings(report: dict) -> dict:
    for result in report["results"]:
        result.pop("seconds", None)
    return report


@pytest.mark.slow
def test_follow_judges_a_live_run_then_gives_the_offline_verdict(tmp_path: Path) -> None:
    run_dir, gate = tmp_path / "live", tmp_path / "gate"
    # the followers start first: the run directory does not exist yet
    full_out, stopped_out = tmp_path / "full.json", tmp_path / "stopped.txt"
    full = _follower(run_dir, full_out, "--format", "json")
    stopped = _follower(run_dir, stopped_out, "--cpu-share", "0.5")  # paced by its own CPU
    full_err, stopped_err = _Lines(full), _Lines(stopped)
    writer_log = tmp_path / "writer.log"
    with writer_log.open("w") as log:
        writer = subprocess.Popen(
            [*LIVE_WRITER, str(run_dir), str(gate), "missing_sample"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        # the bug (a sample missing at step 3) is judged while the writer waits at its gate
        for lines in (full_err, stopped_err):
            lines.wait_for("FT004 error step 3")
        assert full.poll() is None and stopped.poll() is None  # the run has not finished
        stopped.send_signal(signal.SIGINT)
        assert stopped.wait(timeout=TIMEOUT_S) == 130, stopped_err.text()
        said = stopped_err.text()
        assert "stopped before the run finished" in said and "error: interrupted" in said
        assert stopped_out.read_text() == ""  # no report: the verdict was never final
        gate.touch()
        assert writer.wait(timeout=TIMEOUT_S) == 0, writer_log.read_text()
        full.wait(timeout=TIMEOUT_S)
    finally:
        procs: tuple[subprocess.Popen, ...] = (full, stopped, writer)
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        said = full_err.text()
        stopped_err.text()
        for stream in (full.stderr, stopped.stderr):
            if stream is not None:
                stream.close()
    assert full.returncode == 1, said
    assert "final verdict from the whole log" in said
    offline = subprocess.run(
        [str(BIN / "ft-verify"), "--format", "json", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert offline.returncode == 1, offline.stderr
    assert _without_timings(json.loads(full_out.read_text())) == _without_timings(
        json.loads(offline.stdout)
    )


def test_follow_on_a_finished_run_prints_the_offline_report(tmp_path: Path) -> None:
    config = small_synth(6, cells=1, buffer_size=256, samples_per_step=16, checkpoint_every=3)
    run = str(synthesize(tmp_path / "run", config).run_dir)
    followed = CliRunner().invoke(build_app(), ["--follow", "--format", "json", run])
    check_exit(followed, 0)
    assert "final verdict from the whole log" in followed.stderr
    offline = CliRunner().invoke(build_app(), ["--format", "json", run])
    check_exit(offline, 0)
    assert _without_timings(json.loads(followed.stdout)) == _without_timings(
        json.loads(offline.stdout)
    )


def test_follow_and_since_step_do_not_go_together(tmp_path: Path) -> None:
    result = CliRunner().invoke(build_app(), ["--follow", "--since-step", "3", str(tmp_path)])
    check_exit(result, 2)
    assert result.stderr == "error: --follow and --since-step do not go together\n"


@pytest.mark.parametrize(
    ("share", "waits"),
    [(None, 0.1), (0.1, 0.25), (0.5, 0.1)],  # a wait is never shorter than --interval
)
def test_a_paced_follower_waits_for_its_last_polls_cpu_over_the_share(
    tmp_path: Path, share: float | None, waits: float
) -> None:
    config = small_synth(6, cells=1, buffer_size=256, samples_per_step=16, checkpoint_every=3)
    run = synthesize(tmp_path / "run", config).run_dir
    # the driver's last segment (its run_finished) held back: the run is live until the
    # follower's third wait publishes it
    last = max((run / "events").glob("driver.*/*.parquet"))
    held = tmp_path / "held.parquet"
    last.rename(held)
    wall, cpu = [0.0], [0.0]

    def cpu_clock() -> float:
        cpu[0] += 0.025  # read before and after each poll: a poll "costs" 0.025 s
        return cpu[0]

    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        wall[0] += seconds
        if len(slept) == 3:
            held.rename(last)

    pacer = None if share is None else CpuShare(share, clock=lambda: wall[0], cpu=cpu_clock)
    report = follow(
        run,
        interval=0.1,
        select=None,
        skip=(),
        data_manifests=(),
        anchors=NO_ANCHORS,
        pacer=pacer,
        sleep=sleep,
    )
    assert report.passed()
    assert slept == [pytest.approx(waits)] * 3
