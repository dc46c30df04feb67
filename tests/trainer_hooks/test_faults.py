"""Fault injection: schedules from JSON or Python, and real processes that really fail."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftaudit.eventlog import FaultInjected, FaultMode, RunLog, read_records
from ftaudit.trainer_hooks import FaultSchedule, FaultSpec

CHILD = Path(__file__).with_name("fault_child.py")


def test_schedule_from_json_text_file_and_python(tmp_path: Path) -> None:
    text = json.dumps([{"step": 3, "mode": "sigkill", "cell": 1, "rank": 0}])
    path = tmp_path / "faults.json"
    path.write_text(json.dumps({"faults": [{"step": 3, "mode": "sigkill", "cell": 1, "rank": 0}]}))
    python = FaultSchedule.of([FaultSpec(step=3, mode=FaultMode.SIGKILL, cell=1, rank=0)])
    assert FaultSchedule.from_json(text) == FaultSchedule.from_json(path) == python
    assert FaultSchedule.from_json(python.to_json()) == python


def test_schedule_rejects_unknown_modes_and_fields() -> None:
    with pytest.raises(ValueError, match="mode"):
        FaultSchedule.from_json('[{"step": 1, "mode": "meltdown"}]')
    with pytest.raises(ValueError, match="colour"):
        FaultSchedule.from_json('[{"step": 1, "mode": "exit", "colour": "red"}]')


def test_matching_defaults_fire_once() -> None:
    schedule = FaultSchedule.of([{"step": 2, "mode": "exit", "cell": 1}])
    where = dict(step=2, attempt=0, target="trainer", cell=1, rank=5, incarnation=0, at="step")
    assert schedule.find(**where) is not None  # rank None: any rank of cell 1
    assert schedule.find(**{**where, "attempt": 1}) is None  # the retry runs through
    assert schedule.find(**{**where, "incarnation": 1}) is None  # so does the restarted job
    assert schedule.find(**{**where, "cell": 0}) is None
    assert schedule.find(**{**where, "target": "driver"}) is None
    assert schedule.find(**{**where, "at": "after_backward"}) is None


def _start_child(run_dir: Path, spec: dict[str, object]) -> subprocess.Popen[str]:
    schedule = json.dumps([{"cell": 1, "rank": 0, **spec}])
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(run_dir), schedule, "1", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _injected(run_dir: Path) -> list[FaultInjected]:
    return [r.event for r in read_records(run_dir) if isinstance(r.event, FaultInjected)]


@pytest.mark.parametrize(
    ("mode", "returncode"),
    [("sigkill", -signal.SIGKILL), ("exit", 3), ("segfault", -signal.SIGSEGV)],
)
def test_process_dies_after_logging_the_fault(tmp_path: Path, mode: str, returncode: int) -> None:
    RunLog.start(tmp_path, buffer_size=10).close()
    child = _start_child(tmp_path, {"step": 2, "mode": mode, "exit_code": 3})
    out, err = child.communicate(timeout=120)
    assert child.returncode == returncode, err
    assert out.split() == ["step", "0", "step", "1", "step", "2"]  # died at step 2
    (event,) = _injected(tmp_path)
    assert (event.mode, event.step, event.attempt, event.cell, event.rank) == (mode, 2, 0, 1, 0)
    assert event.target == "trainer"


def test_hang_stays_alive_until_killed(tmp_path: Path) -> None:
    RunLog.start(tmp_path, buffer_size=10).close()
    child = _start_child(tmp_path, {"step": 1, "mode": "hang"})
    try:
        deadline = time.monotonic() + 120  # a child importing pyarrow on a loaded machine
        while not any(isinstance(r.event, FaultInjected) for r in read_records(tmp_path)):
            assert time.monotonic() < deadline, "the hang was never logged"
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            time.sleep(0.05)
        time.sleep(0.3)
        assert child.poll() is None  # logged, then hung: still alive
    finally:
        child.kill()
        out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    assert "survived" not in out
    assert [e.mode for e in _injected(tmp_path)] == [FaultMode.HANG]


def test_process_without_a_due_fault_runs_through(tmp_path: Path) -> None:
    RunLog.start(tmp_path, buffer_size=10).close()
    child = _start_child(tmp_path, {"step": 2, "mode": "sigkill", "attempt": 1})
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.strip().endswith("survived")


@pytest.mark.parametrize("faulthandler_on", [False, True])
def test_segfault_fired_off_the_main_thread_still_crashes(faulthandler_on: bool) -> None:
    """Ray runs actor methods on worker threads, where the SIGSEGV handler cannot be reset."""
    script = (
        "import faulthandler, threading\n"
        "from ftaudit.trainer_hooks import FaultSpec\n"
        "from ftaudit.trainer_hooks.faults import fire\n"
        f"{'faulthandler.enable()' if faulthandler_on else 'pass'}\n"
        "t = threading.Thread(target=fire, args=(FaultSpec(step=0, mode='segfault'),))\n"
        "t.start(); t.join()\n"
        "print('survived')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == -signal.SIGSEGV, result.stderr
    assert "survived" not in result.stdout
