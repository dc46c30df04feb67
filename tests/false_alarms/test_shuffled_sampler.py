"""Issue 14 item 7: a real ``DistributedSampler(shuffle=True)`` run that declares a
deterministic order verifies when sample indices are stream positions, across epochs and
a job kill mid-epoch; the same run logging dataset indices fails FT005."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from torch.utils.data import DistributedSampler

from ftaudit.trainer_hooks import sampler_positions
from ftaudit.verifier import verify
from tests.false_alarms.cells import Job, failures

pytestmark = pytest.mark.slow
DATASET, RANKS, PER_RANK = 24, 2, 4  # 12 items per rank and epoch: 3 steps an epoch


class Loader:
    """Each rank's ``DistributedSampler`` over a dataset of ``DATASET`` items; yields the
    step's samples as (stream positions, dataset items), rank by rank."""

    def __init__(self, consumed_steps: int = 0) -> None:
        self.samplers = [
            DistributedSampler(range(DATASET), num_replicas=RANKS, rank=r, shuffle=True, seed=3)
            for r in range(RANKS)
        ]
        self.per_epoch = self.samplers[0].num_samples // PER_RANK
        self.step = consumed_steps  # a resume restores the position, not the dataset index

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        epoch, k = divmod(self.step, self.per_epoch)
        positions, items = [], []
        for rank, sampler in enumerate(self.samplers):
            sampler.set_epoch(epoch)
            order = list(iter(sampler))
            offsets = np.arange(k * PER_RANK, (k + 1) * PER_RANK)
            positions.append(
                sampler_positions(
                    epoch=epoch,
                    rank=rank,
                    num_replicas=RANKS,
                    local_offsets=offsets,
                    epoch_size=sampler.total_size,
                )
            )
            items.append(np.asarray(order)[offsets])
        self.step += 1
        return np.concatenate(positions), np.concatenate(items)


def _run(tmp_path: Path, *, log_dataset_index: bool) -> Path:
    run_dir = tmp_path / "run"
    table: dict[int, int] = {}

    def items(samples: np.ndarray) -> np.ndarray:
        return samples if log_dataset_index else np.asarray([table[int(s)] for s in samples])

    def train(job: Job, loader: Loader, steps: range) -> None:
        for step in steps:
            positions, read = loader.next()
            table.update(zip(positions.tolist(), read.tolist(), strict=True))
            job.step(step, read if log_dataset_index else positions)
            if step == 3:
                job.checkpoint(3)

    job = Job.start(run_dir, buffer_size=80, items=items)
    train(job, Loader(), range(6))
    job.die()  # killed mid-epoch (epoch 1, step 5): steps 4..5 are abandoned
    job = Job.start(run_dir, buffer_size=80, resume_from=3, items=items)
    train(job, Loader(consumed_steps=4), range(4, 8))
    job.finish()
    return run_dir


def test_stream_positions_of_a_shuffled_sampler_verify(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, log_dataset_index=False))
    assert report.passed(strict=True), failures(report)


def test_dataset_indices_as_sample_indices_fail(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, log_dataset_index=True))
    kinds = {v.kind for r in report.results for v in r.violations if r.code == "FT005"}
    assert "duplicate_sample" in kinds, failures(report)
