"""A Lightning run recorded by ftaudit, then verified.

Run it:  python examples/lightning_fit.py [RUN_DIR]
(2 processes: torchrun --nproc-per-node 2 examples/lightning_fit.py RUN_DIR, with
``devices=2, strategy="ddp"``)

A tiny language model, 4 steps of 2 accumulated batches, a checkpoint every 2 steps.
Resume with ``trainer.fit(model, loader, ckpt_path=...)``: a new incarnation of the run.
For a resume in the middle of an epoch, give Lightning a loader with ``state_dict`` /
``load_state_dict`` (torchdata's ``StatefulDataLoader``, or your own): with a plain
``DataLoader`` Lightning starts the epoch over, and ``ft-verify`` reports the replay.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from ftaudit.integrations.lightning import FtauditCallback, IndexedDataset


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"tokens": torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(i))}


class TinyLM(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(64, 16)
        self.layers = nn.ModuleList(  # the witnesses go at the input and output of this list
            nn.Sequential(nn.LayerNorm(16), nn.Linear(16, 16), nn.GELU()) for _ in range(2)
        )
        self.out = nn.Linear(16, 64)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        tokens = batch["tokens"]  # the batch also holds ftaudit_sample_index: left alone
        h = self.embed(tokens)
        for layer in self.layers:
            h = h + layer(h)
        logits = self.out(h)
        loss = nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main(work: Path) -> None:
    pl.seed_everything(0)
    loader = torch.utils.data.DataLoader(IndexedDataset(Tokens()), batch_size=4, shuffle=True)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=4,
        accumulate_grad_batches=2,
        callbacks=[
            FtauditCallback(work / "run", buffer_size=64, input_key="tokens"),
            pl.callbacks.ModelCheckpoint(dirpath=work / "ckpt", every_n_train_steps=2),
        ],
        logger=False,
        enable_progress_bar=False,
    )
    trainer.fit(TinyLM(), loader)

    if trainer.is_global_zero:
        from ftaudit.verifier import verify

        report = verify(work / "run")
        print("verified" if report.passed() else report.to_dict())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
