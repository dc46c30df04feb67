"""Issue 14 item 5: batch-norm running statistics differ per cell by design (each cell
normalises its own shard); declared replica-local, a correct run verifies, and a load
that restores them wrong is still caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from ftaudit.verifier import verify
from tests.false_alarms.cells import Job, failures
from tests.support.torch_models import HIDDEN, TinyTransformer

pytestmark = pytest.mark.slow
LOCAL = ("buffer/norm.running_mean", "buffer/norm.running_var")


class NormedTransformer(TinyTransformer):
    """The tiny transformer with a batch norm over the embeddings (running statistics)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(HIDDEN)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.norm(self.embed(tokens).transpose(1, 2)).transpose(1, 2)
        for layer in self.layers:
            hidden, _ = layer(hidden)
        return self.head(hidden)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return NormedTransformer()


def _run(tmp_path: Path, *, declare: bool, break_load: bool = False) -> Path:
    run_dir = tmp_path / "run"
    local = LOCAL if declare else ()
    job = Job.start(run_dir, model_factory=_model, replica_local=local)
    for step in range(4):
        job.step(step, range(8 * step, 8 * step + 8))
        if step == 1:
            job.checkpoint(1)
    job.die()
    job = Job.start(run_dir, resume_from=1, model_factory=_model, replica_local=local)
    if break_load:  # a restore that skipped the buffers: the statistics of a fresh model
        with torch.no_grad():
            job.replicas[1].model.norm.running_mean.zero_()
        with job.replicas[1].hooks.step(2, 0):
            job.replicas[1].hooks.log_checksums("after_load", checkpoint=job.driver.resume_from)
    for step in range(2, 5):
        job.step(step, range(8 * step, 8 * step + 8))
    job.finish()
    return run_dir


def test_declared_replica_local_statistics_verify(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, declare=True))
    assert report.passed(strict=True), failures(report)


def test_undeclared_they_are_reported_as_diverged(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, declare=False))
    kinds = {v.kind for r in report.results for v in r.violations}
    assert kinds == {"replica_mismatch"}, failures(report)


def test_a_replica_local_tensor_loaded_wrong_is_caught(tmp_path: Path) -> None:
    report = verify(_run(tmp_path, declare=True, break_load=True))
    found = {(v.kind, v.location.cell) for r in report.results for v in r.violations}
    assert ("restore_mismatch", 1) in found, failures(report)
