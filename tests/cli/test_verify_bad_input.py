"""Every unusable input of issue 4 item 5: exit code 2, one line on stderr, no traceback."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

import pytest

from ftaudit.eventlog import EventRegistry, EventWriter, RunLog, Trainer
from ftaudit.eventlog.events import BUILTIN_EVENTS, Event
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import segments, write_foreign_parquet


class GpuTemperature(Event):
    """A user event type that the verifying process has never registered."""

    type: Literal["gpu_temperature"] = "gpu_temperature"
    celsius: float


def _check_unusable(ftaudit: Invoke, run_dir: Path, *expected: str) -> str:
    result = ftaudit("verify", run_dir)
    check_exit(result, 2)
    assert result.stdout == "", "no report may be printed for an unusable run"
    err = result.stderr
    assert err.startswith("error: ") and err.count("\n") == 1, f"not one line: {err!r}"
    assert "Traceback" not in err
    for text in expected:
        assert text in err, err
    return err


def test_missing_path(ftaudit: Invoke, tmp_path: Path) -> None:
    _check_unusable(ftaudit, tmp_path / "nope", "nope", "no such run directory")


def test_not_a_directory(ftaudit: Invoke, tmp_path: Path) -> None:
    file = tmp_path / "run.txt"
    file.write_text("hello")
    _check_unusable(ftaudit, file, "run.txt", "not a directory")


def test_directory_that_is_not_a_run(ftaudit: Invoke, tmp_path: Path) -> None:
    _check_unusable(ftaudit, tmp_path, "not a run directory")


def test_run_without_events(ftaudit: Invoke, tmp_path: Path) -> None:
    (tmp_path / "events").mkdir()
    _check_unusable(ftaudit, tmp_path, "no event segments")


def test_unreadable_segment(ftaudit: Invoke, fresh_run: Path) -> None:
    victim = segments(fresh_run)[0]
    victim.write_bytes(b"this is not parquet at all")
    _check_unusable(ftaudit, fresh_run, victim.name, "not a readable Parquet file")


def test_truncated_segment(ftaudit: Invoke, fresh_run: Path) -> None:
    victim = segments(fresh_run)[-1]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    _check_unusable(ftaudit, fresh_run, victim.name, "not a readable Parquet file")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_segment_without_read_permission(ftaudit: Invoke, fresh_run: Path) -> None:
    victim = segments(fresh_run)[0]
    victim.chmod(0)
    try:
        _check_unusable(ftaudit, fresh_run, victim.name)
    finally:
        victim.chmod(0o644)


def test_foreign_parquet(ftaudit: Invoke, fresh_run: Path) -> None:
    foreign = write_foreign_parquet(fresh_run)
    _check_unusable(ftaudit, fresh_run, foreign.name, "foreign Parquet file")


def test_unknown_event_type(ftaudit: Invoke, tmp_path: Path) -> None:
    run = RunLog.start(tmp_path / "run", buffer_size=8)
    registry = EventRegistry((*BUILTIN_EVENTS, GpuTemperature))
    writer = EventWriter(
        run.run_dir,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id=run.run_id,
        incarnation=0,
        registry=registry,
    )
    writer.log(GpuTemperature(celsius=81.5))
    writer.close()
    run.finish()
    _check_unusable(ftaudit, run.run_dir, "gpu_temperature", "not registered")
