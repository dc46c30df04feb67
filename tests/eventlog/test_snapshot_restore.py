"""Snapshot at a checkpoint, restore as a new incarnation; nothing is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.eventlog import (
    CheckpointRef,
    Driver,
    Metric,
    RunLog,
    Trainer,
    WriterOptions,
    connect,
    find_checkpoint,
    read_records,
)

FAST = WriterOptions(fsync=False)


def _train(run: RunLog, steps: range, checkpoint_at: int | None = None) -> None:
    driver, trainer = run.writer(Driver()), run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in steps:
        trainer.log(Metric(step=step, attempt=0, values={"loss": float(step)}))
        driver.log(Metric(step=step, attempt=0, values={"lr": 0.1}))
        if step == checkpoint_at:
            run.record_checkpoint(step, path=f"ckpt-{step}")


def test_resume_shows_rows_written_after_the_checkpoint(tmp_path: Path):
    run0 = RunLog.start(tmp_path, buffer_size=64, options=FAST)
    _train(run0, range(0, 6), checkpoint_at=3)
    run0.flush()  # incarnation 0 "crashes" after step 5: nothing closes it

    run1 = RunLog.start(tmp_path, buffer_size=64, resume_from=3, options=FAST)
    assert run1.incarnation == 1
    _train(run1, range(4, 8))
    run1.finish()
    run0.close()

    con = connect(tmp_path)
    assert con.execute("SELECT * FROM resumes WHERE incarnation = 1").fetchone()[1:3] == (3, 0)
    rolled_back = con.execute(
        "SELECT DISTINCT step FROM rolled_back_events WHERE type = 'metric' ORDER BY step"
    ).fetchall()
    assert rolled_back == [(4,), (5,)]
    # nothing was deleted: both incarnations' steps 4 and 5 are on disk
    per_incarnation = con.execute(
        "SELECT incarnation, count(*) FROM metric WHERE step IN (4, 5) GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert per_incarnation == [(0, 4), (1, 4)]
    # the snapshot is one row per writer of the process, not a copy of the log
    assert con.execute("SELECT count(*) FROM checkpoint_snapshots").fetchone() == (2,)


def test_snapshot_records_each_writers_last_durable_seq(tmp_path: Path):
    run = RunLog.start(tmp_path, buffer_size=64, options=FAST)
    _train(run, range(3), checkpoint_at=2)
    run.finish()
    checkpoint = next(r for r in read_records(tmp_path) if r.event.type == "checkpoint_saved")
    for writer_id, last in checkpoint.event.writers.items():
        seqs = [r.envelope.seq for r in read_records(tmp_path) if r.envelope.writer == writer_id]
        assert last in seqs  # durable when recorded
        if writer_id != checkpoint.envelope.writer:
            assert last == max(seqs)  # the trainer wrote nothing after the checkpoint
    assert checkpoint.event.complete


def test_restart_before_any_checkpoint(tmp_path: Path):
    run0 = RunLog.start(tmp_path, buffer_size=64, options=FAST)
    _train(run0, range(2))
    run0.close()
    run1 = RunLog.start(tmp_path, buffer_size=64, resume_from=None, options=FAST)
    _train(run1, range(0, 3))
    run1.finish()
    con = connect(tmp_path)
    assert con.execute(
        "SELECT incarnation, resumed_iteration FROM resumes ORDER BY 1"
    ).fetchall() == [
        (0, None),
        (1, None),
    ]


def test_resume_from_a_checkpoint_that_was_never_saved_is_refused(tmp_path: Path):
    run0 = RunLog.start(tmp_path, buffer_size=64, options=FAST)
    _train(run0, range(3), checkpoint_at=1)
    run0.finish()
    assert find_checkpoint(tmp_path, 1) == CheckpointRef(iteration=1, incarnation=0)
    with pytest.raises(ValueError, match="no complete checkpoint at iteration 2"):
        RunLog.start(tmp_path, buffer_size=64, resume_from=2, options=FAST)


def test_incarnation_numbers_are_never_reused(tmp_path: Path):
    numbers = [RunLog.start(tmp_path, buffer_size=8, options=FAST) for _ in range(3)]
    assert [r.incarnation for r in numbers] == [0, 1, 2]
    assert len({r.run_id for r in numbers}) == 1
    for run in numbers:
        run.close()
    attached = RunLog.attach(tmp_path, 1, options=FAST)
    assert attached.run_id == numbers[0].run_id
    with pytest.raises(ValueError, match="never started"):
        RunLog.attach(tmp_path, 7)


def test_quickstart_example_runs(tmp_path: Path):
    import subprocess
    import sys

    example = Path(__file__).parents[2] / "examples" / "quickstart.py"
    out = subprocess.run(
        [sys.executable, str(example), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "witness_allocated" in out  # the count per type
    assert "grad_norm" in out and "nan" in out  # NaN metrics survive
    assert "last_seq" in out  # the checkpoint snapshot
