"""Truncation: deleting the end of a run, a worker's tail or a whole writer is detected.

Deleting ``run_finished``, the last step's records, the whole last incarnation, or
workers that no checkpoint vouched for used to give exit 0. Now the driver's checkpoint
records the head of every writer of the job (read from the run directory: the workers
are other processes), ``run_finished`` every writer's final head, and
``--require-finished`` fails a run whose last incarnation did not finish, naming the
writers whose tails no record vouches for.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ftaudit.eventlog import (
    CheckpointSaved,
    Driver,
    Metric,
    RunFinished,
    RunLog,
    StepEnd,
    WriterOptions,
    read_records,
)
from tests.support.cli import Invoke, check_exit

OPTIONS = WriterOptions(fsync=False, flush_interval_s=3600)

WORKER = textwrap.dedent(
    """
    import sys
    from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions
    run = RunLog.attach(sys.argv[1], int(sys.argv[2]),
                        WriterOptions(fsync=False, flush_interval_s=3600))
    w = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in range(int(sys.argv[3]), int(sys.argv[4])):
        w.log(Metric(step=step, attempt=0, values={"loss": 1.0 / (step + 1)}))
        w.flush()
    run.close()
    """
)


def _worker(run_dir: Path, incarnation: int, first: int, last: int) -> None:
    """A trainer in another process logs steps ``first..last-1``, one segment per step."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(run_dir), str(incarnation), str(first), str(last)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def _incarnation(
    run_dir: Path, steps: range, *, finish: bool, resume_from: int | None = None
) -> None:
    """One incarnation: a worker process trains ``steps``; the driver checkpoints in the
    middle (the worker trains the rest after it) and finishes unless it 'crashes'."""
    run = RunLog.start(run_dir, buffer_size=8, resume_from=resume_from, options=OPTIONS)
    middle = steps.start + len(steps) // 2
    _worker(run_dir, run.incarnation, steps.start, middle)
    driver = run.writer(Driver())
    for step in range(steps.start, middle):
        driver.log(StepEnd(step=step, attempt=0, accepted_attempt=0, cells={}))
    run.record_checkpoint(middle - 1)
    _worker(run_dir, run.incarnation, middle, steps.stop)
    for step in range(middle, steps.stop):
        driver.log(StepEnd(step=step, attempt=0, accepted_attempt=0, cells={}))
    if finish:
        run.finish()
    else:
        run.flush()  # and the driver dies here


@pytest.fixture(scope="module")
def finished_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("finished") / "run"
    _incarnation(run, range(0, 6), finish=True)
    return run


@pytest.fixture(scope="module")
def crashed_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("crashed") / "run"
    _incarnation(run, range(0, 6), finish=False)
    return run


@pytest.fixture
def finished(finished_base: Path, tmp_path: Path) -> Path:
    """A finished run of this test's own: trainer process A logged steps 0..2 before the
    checkpoint, trainer process B steps 3..5 after it."""
    shutil.copytree(finished_base, tmp_path / "run")
    return tmp_path / "run"


def _writers(run: Path, prefix: str) -> list[Path]:
    """The writer folders of ``prefix``, in the order their processes started."""
    folders = [p for p in (run / "events").iterdir() if p.name.startswith(prefix)]
    return sorted(folders, key=lambda p: min(q.stat().st_mtime_ns for q in p.iterdir()))


def _violations(ftaudit: Invoke, run: Path, *flags: str, code: int) -> list[dict]:
    result = ftaudit("verify", run, "--rule", "FT001", "--format", "json", *flags)
    check_exit(result, code)
    return [v for r in json.loads(result.stdout)["results"] for v in r["violations"]]


def test_the_driver_records_every_writer_of_the_job(finished: Path) -> None:
    a, b = _writers(finished, "trainer")
    records = read_records(finished)
    [checkpoint] = [r.event for r in records if isinstance(r.event, CheckpointSaved)]
    [final] = [r.event for r in records if isinstance(r.event, RunFinished)]
    assert a.name not in checkpoint.writers  # another process: not in its own snapshot
    assert checkpoint.job_heads[a.name].last_seq == 2  # steps 0..2 were on disk
    assert b.name not in checkpoint.job_heads  # B started after the checkpoint
    assert final.final_heads[a.name].last_seq == 2
    assert final.final_heads[b.name].last_seq == 2
    assert final.final_heads[b.name].digest  # and its chain head


def test_a_finished_run_verifies_with_require_finished(ftaudit: Invoke, finished: Path) -> None:
    assert _violations(ftaudit, finished, "--require-finished", "--strict", code=0) == []


def test_a_deleted_worker_contradicts_the_checkpoint(ftaudit: Invoke, finished: Path) -> None:
    shutil.rmtree(_writers(finished, "trainer")[0])
    found = _violations(ftaudit, finished, code=1)
    assert [v["kind"] for v in found] == ["truncated_tail"]
    assert "has no segment at all" in found[0]["message"]


def test_a_workers_tail_after_the_checkpoint_contradicts_run_finished(
    ftaudit: Invoke, finished: Path
) -> None:
    last = sorted(_writers(finished, "trainer")[1].glob("*.parquet"))[-1]
    last.unlink()  # step 5: after the checkpoint, only run_finished vouches for it
    found = _violations(ftaudit, finished, code=1)
    assert [v["kind"] for v in found] == ["truncated_tail"]
    assert "run_finished of incarnation 0" in found[0]["message"]


def test_deleting_run_finished_fails_only_a_run_required_to_finish(
    ftaudit: Invoke, finished: Path
) -> None:
    driver_segments = sorted(_writers(finished, "driver")[0].glob("*.parquet"))
    driver_segments[-1].unlink()  # the segment holding run_finished: looks like a crash
    assert _violations(ftaudit, finished, code=0) == []  # a crash is a legitimate end
    found = _violations(ftaudit, finished, "--require-finished", code=1)
    assert [v["kind"] for v in found if v["severity"] == "error"] == ["unfinished"]


def test_deleting_the_last_steps_records_and_the_end(ftaudit: Invoke, finished: Path) -> None:
    for seg in sorted(_writers(finished, "driver")[0].glob("*.parquet"))[-2:]:
        seg.unlink()  # the last step ends and run_finished
    found = _violations(ftaudit, finished, "--require-finished", code=1)
    assert "unfinished" in [v["kind"] for v in found]


@pytest.mark.slow
def test_deleting_the_whole_last_incarnation(ftaudit: Invoke, tmp_path: Path) -> None:
    run = tmp_path / "run"
    _incarnation(run, range(0, 4), finish=False)
    _incarnation(run, range(2, 8), finish=True, resume_from=1)
    check_exit(ftaudit("verify", run, "--rule", "FT001", "--require-finished"), 0)
    for folder in (run / "events").iterdir():
        if ".i1." in folder.name:
            shutil.rmtree(folder)
    shutil.rmtree(run / "incarnations" / "000001")
    found = _violations(ftaudit, run, "--require-finished", code=1)
    assert "unfinished" in [v["kind"] for v in found]


def test_a_claimed_incarnation_without_events_is_unfinished(
    ftaudit: Invoke, finished: Path
) -> None:
    (finished / "incarnations" / "000001").mkdir()  # launched, then its events deleted
    found = _violations(ftaudit, finished, "--require-finished", code=1)
    assert [v["message"] for v in found if v["kind"] == "unfinished"] == [
        "the run did not finish: its last incarnation 1 logged no run_finished (it wrote "
        "no events at all (they were deleted, or it died at once))"
    ]


def test_writers_no_record_vouches_for_are_named(ftaudit: Invoke, crashed_base: Path) -> None:
    found = _violations(ftaudit, crashed_base, "--require-finished", code=1)
    tails = sorted(v["location"]["writer"] for v in found if v["kind"] == "unvouched_tail")
    # the driver's tail and trainer B (after the checkpoint); A is vouched for by it
    expected = [_writers(crashed_base, "driver")[0], _writers(crashed_base, "trainer")[1]]
    assert tails == sorted(p.name for p in expected)
    assert all(v["severity"] == "warning" for v in found if v["kind"] == "unvouched_tail")


def test_metric_values_are_what_the_worker_logged(finished: Path) -> None:
    losses = [r.event.values["loss"] for r in read_records(finished) if isinstance(r.event, Metric)]
    assert losses == [1.0 / (s + 1) for s in range(6)]
