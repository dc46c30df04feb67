"""A disk that fills up or turns read-only mid-run: training goes on, the log says what it lost.

The outages are real (see :mod:`tests.reliability.disk_child`): a size-limited tmpfs filled
to ENOSPC, a tmpfs remounted read-only (EROFS), or, where this user may not mount,
``RLIMIT_FSIZE`` (EFBIG) and read-only folders (EACCES).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ftaudit.errors import WriterError
from ftaudit.eventlog import EventWriter, Metric, Trainer, WriterOptions, read_records, scan_run
from ftaudit.verifier import verify

ROOT = Path(__file__).resolve().parents[2]


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True)
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
    )
    return done.returncode == 0


@pytest.fixture(params=["tmpfs", pytest.param("fsize", marks=pytest.mark.slow)])
def small_fs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | None]:
    """A 2 MiB tmpfs; None for the ``fsize`` variant or where this user may not mount."""
    mount = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mounted = request.param == "tmpfs" and _mount_tmpfs(mount, "2m")
    yield mount if mounted else None
    if mounted:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _train(run_dir: Path, *args: str | Path) -> tuple[dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.reliability.disk_child", str(run_dir), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, f"training crashed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout.splitlines()[-1]), done.stderr


def _outage(small_fs: Path | None) -> list[str]:
    if small_fs is not None:
        return ["--outage", "full", "--mount", small_fs]
    return ["--outage", "fsize"]  # no tmpfs: a per-file size limit gives real EFBIG errors


def _run_dir(small_fs: Path | None, tmp_path: Path) -> Path:
    return (small_fs or tmp_path) / "run"


def _ft001(run_dir: Path) -> list[str]:
    (result,) = verify(run_dir, select=["FT001"]).results
    return [f"{v.severity.value}: {v.message}" for v in result.violations]


def test_fail_open_keeps_training_and_loses_nothing_it_could_buffer(
    small_fs: Path | None, tmp_path: Path
) -> None:
    run_dir = _run_dir(small_fs, tmp_path)
    out, stderr = _train(run_dir, *_outage(small_fs))
    assert out["steps_done"] == 30 and out["error"] is None  # training never noticed
    assert out["write_errors"] >= 10  # every flush of the ten broken steps failed
    assert out["events_dropped"] == 0
    lines = [line for line in stderr.splitlines() if out["writer"] in line]
    warnings = [line for line in lines if "cannot write events" in line]
    assert len(warnings) == 1, stderr  # said once, clearly: who, where, why, what next
    assert any("writing events of" in line and "again" in line for line in lines), stderr
    reason = "No space left on device" if small_fs is not None else "File too large"
    assert reason in warnings[0] and out["writer"] in warnings[0], warnings[0]
    assert "retrying" in warnings[0]
    # once the disk healed, the buffered events were written: all of them, in order
    seqs = sorted(
        r.envelope.seq for r in read_records(run_dir) if r.envelope.writer == out["writer"]
    )
    assert seqs == list(range(out["logged"]))
    assert not scan_run(run_dir).torn  # failed flushes removed their temp files
    assert _ft001(run_dir) == []


def test_fail_open_beyond_the_buffer_drops_the_oldest_and_ft001_names_the_gap(
    small_fs: Path | None, tmp_path: Path
) -> None:
    run_dir = _run_dir(small_fs, tmp_path)
    out, _ = _train(run_dir, *_outage(small_fs), "--max-buffered", 500)
    assert out["steps_done"] == 30 and out["error"] is None
    dropped = out["events_dropped"]
    assert dropped == 10 * 200 - 500  # ten steps of 200 events, 500 kept in memory
    problems = _ft001(run_dir)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"error: hole in writer {out['writer']}: events 2000..")
    assert "the writer dropped them" in problems[0] and f"{dropped} events" in problems[0]
    exit_code = subprocess.run(
        [Path(sys.executable).with_name("ft-verify"), run_dir, "--rule", "FT001"],
        capture_output=True,
    ).returncode
    assert exit_code == 1


def test_fail_closed_raises_a_clear_error(small_fs: Path | None, tmp_path: Path) -> None:
    run_dir = _run_dir(small_fs, tmp_path)
    out, _ = _train(run_dir, *_outage(small_fs), "--fail-closed")
    assert out["steps_done"] == 10  # the first flush on the broken disk stopped training
    assert out["error"].startswith(f"{run_dir}: cannot write events of {out['writer']}: ")
    reason = "No space left on device" if small_fs is not None else "File too large"
    assert reason in out["error"]


def test_read_only_directory(small_fs: Path | None, tmp_path: Path) -> None:
    if small_fs is None and os.geteuid() == 0:
        pytest.skip("root ignores folder modes: the tmpfs variant remounts read-only instead")
    run_dir = _run_dir(small_fs, tmp_path)
    mount = small_fs or run_dir
    out, stderr = _train(run_dir, "--outage", "readonly", "--mount", mount, "--max-buffered", 500)
    assert out["steps_done"] == 30 and out["error"] is None
    reason = "Read-only file system" if small_fs is not None else "Permission denied"
    assert reason in stderr
    problems = _ft001(run_dir)
    assert len(problems) == 1 and "the writer dropped them" in problems[0], problems


def test_fail_closed_background_failure_is_raised_by_the_next_log(tmp_path: Path) -> None:
    """The flusher thread's failure reaches the training loop at its next ``log`` call.

    The failure is real: ``events/`` is a regular file, so creating the writer's folder
    fails in the kernel (ENOTDIR/EEXIST), whoever runs the test.
    """
    (tmp_path / "events").write_text("in the way")
    writer = EventWriter(
        tmp_path,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="r",
        incarnation=0,
        options=WriterOptions(fsync=False, flush_rows=10, flush_interval_s=0.01, fail_closed=True),
    )
    for i in range(10):
        writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
    deadline = time.monotonic() + 120
    while writer.stats.write_errors == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.stats.write_errors >= 1
    with pytest.raises(WriterError, match="cannot write events of"):
        for i in range(10, 1000):  # the flusher may need a moment to record its failure
            writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
            time.sleep(0.001)
    (tmp_path / "events").unlink()  # the disk "heals": the next flush writes everything
    durable = writer.flush()
    writer.close()
    assert durable >= 9
    assert sorted(r.envelope.seq for r in read_records(tmp_path)) == list(range(durable + 1))
