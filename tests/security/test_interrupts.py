"""Ctrl-C and runaway queries: a real SIGINT stops DuckDB at once, with one line and exit 130.

DuckDB runs a query in C++ without looking at Python's signal flags: Ctrl-C used to be
ignored until the query ended (these queries do not end) and then read "internal error:
Query interrupted", exit 2. The signal is sent to a real process once it is busy in the
query (its CPU time, not a wall-clock guess, says so); no assertion is about duration.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftaudit.cli.sql_cmd import DEFAULT_TIMEOUT_S
from tests.support.cli import Invoke, check_exit
from tests.support.processes import as_foreground_job

ENDLESS = {
    "aggregate": "SELECT sum(hash(range)) FROM range(100000000000000)",
    "join": "SELECT count(*) FROM range(10000000) a, range(10000000) b WHERE a.range + b.range < 0",
    "materialize": "SELECT list(range) FROM range(100000000000)",
}
WAIT_S = 300
"""Generous bound on any wait for a subprocess (the machine may be loaded)."""


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start(args: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=as_foreground_job,
    )


def _busy(proc: subprocess.Popen[str], cpu_s: float) -> None:
    """Wait until ``proc`` has burnt ``cpu_s`` of CPU: it is inside the endless query."""
    deadline = time.monotonic() + WAIT_S
    while _cpu_seconds(proc.pid) < cpu_s:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the query never got busy"
        time.sleep(0.2)


def _interrupted(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("Ctrl-C was ignored: the query kept running")
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert err == "error: interrupted\n", err
    assert out == ""


def _sql_busy(run: Path, query: str) -> subprocess.Popen[str]:
    proc = _start([_bin("ftaudit"), "sql", str(run), query, "--timeout", "0"])
    _busy(proc, cpu_s=2.0)  # starting and loading this run take under 1 s of CPU
    return proc


def test_ctrl_c_stops_an_endless_query(good_run: Path) -> None:
    _interrupted(_sql_busy(good_run, ENDLESS["aggregate"]))


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["join", "materialize"])
def test_ctrl_c_stops_every_shape_of_query(good_run: Path, shape: str) -> None:
    _interrupted(_sql_busy(good_run, ENDLESS[shape]))


@pytest.mark.slow
def test_ctrl_c_during_verification(tmp_path: Path) -> None:
    run = tmp_path / "big"
    done = subprocess.run(
        # 16 cells: verifying it takes 3-4 s of CPU, so that the Ctrl-C sent after the
        # first second lands while it runs, however loaded the machine (at 4 cells it
        # took under 2 s, and a loaded poll could see it finish first)
        [_bin("ftaudit"), "synth", str(run), "--steps", "3000", "--cells", "16"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 0, done
    proc = _start([_bin("ft-verify"), str(run)])
    _busy(proc, cpu_s=1.0)  # imports done; it is reading or judging the run
    _interrupted(proc)


def test_timeout_stops_a_runaway_query(good_run: Path) -> None:
    done = subprocess.run(
        [_bin("ftaudit"), "sql", str(good_run), ENDLESS["aggregate"], "--timeout", "1"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    assert done.returncode == 3, done
    assert done.stderr == (
        "error: query stopped after 1 s (--timeout 1); narrow it, or allow it longer "
        "with --timeout\n"
    )


def test_the_default_timeout_is_a_minute() -> None:
    assert DEFAULT_TIMEOUT_S == 60


def test_row_cap(ftaudit: Invoke, good_run: Path) -> None:
    result = ftaudit("sql", good_run, "SELECT * FROM events", "--max-rows", "10")
    check_exit(result, 3)
    assert result.stdout == ""
    assert result.stderr.startswith("error: query returned more than 10 rows (--max-rows 10)")
    check_exit(ftaudit("sql", good_run, "SELECT * FROM events", "--max-rows", "0"), 0)
    check_exit(ftaudit("sql", good_run, "SELECT * FROM events LIMIT 10", "--max-rows", "10"), 0)
