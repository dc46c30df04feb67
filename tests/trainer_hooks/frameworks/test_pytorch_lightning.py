"""The same callback for the standalone ``pytorch_lightning`` package (one process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pytorch_lightning")

import pytorch_lightning as pl
import torch
from torch import nn

from ftaudit.integrations.pytorch_lightning import FtauditCallback, IndexedDataset
from ftaudit.verifier import verify

pytestmark = [
    pytest.mark.slow,
    # Lightning's own notices (torch pytree deprecation, "few dataloader workers")
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(i))}


class Regressor(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(2))

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        h = batch["x"]
        for block in self.blocks:
            h = h + block(h)
        loss = h.pow(2).mean()
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def test_a_pytorch_lightning_run_verifies(tmp_path: Path) -> None:
    callback = FtauditCallback(tmp_path / "run", buffer_size=16, input_key="x")
    assert isinstance(callback, pl.Callback)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=4,
        accumulate_grad_batches=2,
        callbacks=[
            callback,
            pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2),
        ],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    loader = torch.utils.data.DataLoader(IndexedDataset(Tokens()), batch_size=2, shuffle=True)
    trainer.fit(Regressor(), loader)
    report = verify(tmp_path / "run")
    assert report.passed(strict=True), report.to_dict()
    saved = torch.load(next((tmp_path / "ckpt").glob("*.ckpt")), weights_only=True)
    assert len(saved["callbacks"]["FtauditCallback"]["rng"]) == 1  # one process's states
