"""What a restarted job resumes from: the latest complete checkpoint in the log."""

from __future__ import annotations

from pathlib import Path

from ftaudit.eventlog import (
    CheckpointRef,
    ResumeIndex,
    RunLog,
    Trainer,
    complete_checkpoints,
    find_checkpoint,
    latest_checkpoint,
)


def _incarnation(root: Path, saves: list[int], resume_from: int | None = None) -> None:
    run = RunLog.start(root, buffer_size=8, resume_from=resume_from)
    for iteration in saves:
        # a worker's part is not complete; only the driver's mark makes it resumable
        run.record_checkpoint(
            iteration, path=f"w{iteration}", source=Trainer(cell_index=0, rank_within_cell=0)
        )
        run.record_checkpoint(iteration, path=f"ckpt/{iteration}")
    run.close()


def test_fresh_directory_has_none(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "nothing") is None
    assert complete_checkpoints(tmp_path / "nothing") == []


def test_latest_is_the_last_saved_not_the_highest_iteration(tmp_path: Path) -> None:
    root = tmp_path / "run"
    _incarnation(root, [1, 3])
    latest = latest_checkpoint(root)
    assert latest is not None
    assert (latest.ref, latest.path) == (CheckpointRef(iteration=3, incarnation=0), "ckpt/3")
    _incarnation(root, [], resume_from=1)  # resumed from an older one, saved nothing yet
    assert latest_checkpoint(root).ref == CheckpointRef(iteration=3, incarnation=0)
    _incarnation(root, [2], resume_from=1)  # a later incarnation's save supersedes 3
    assert latest_checkpoint(root).ref == CheckpointRef(iteration=2, incarnation=2)
    assert [c.ref.iteration for c in complete_checkpoints(root)] == [1, 3, 2]
    assert find_checkpoint(root, 3) == CheckpointRef(iteration=3, incarnation=0)
    assert find_checkpoint(root, 4) is None
    _incarnation(root, [3], resume_from=2)  # iteration 3 saved again by incarnation 3
    at3 = ResumeIndex.open(root).complete_at(3)
    assert at3 is not None and (at3.ref.incarnation, at3.path) == (3, "ckpt/3")
