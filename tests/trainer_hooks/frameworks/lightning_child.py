"""One process of a 2-process Lightning run (strategy ``ddp``, CPU), launched by torchrun.

Upstream (lightning 2.6.6): ``loops/training_epoch_loop.py`` ``reset`` warns that a
mid-epoch resume with a loader that is not resumable "can cause unreliable results": the
epoch starts again from its first batch; ``loops/fit_loop.py`` ``on_save_checkpoint`` /
``_load_combined_loader_states`` save and restore ``state_dict()`` of loaders that have
one. Usage: ``torchrun --nproc-per-node 2 lightning_child.py RUN_DIR CKPT_DIR MODE`` with
MODE ``fresh``, ``kill@S`` (SIGKILL rank 1 in optimizer step S), ``resume`` (from the
newest checkpoint), or ``resume-loader-not-restored`` (the bug: the loader's
``load_state_dict`` ignores the saved position, so the resumed epoch replays its first
batches).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

from ftaudit.integrations.lightning import FtauditCallback, IndexedDataset

DATASET, SEQ, VOCAB, HIDDEN = 32, 8, 64, 16
BUFFER = 32  # one step: 2 ranks x 2 per batch x 2 accumulated = 8 ids <= 32 - 22
STEPS, SAVE_EVERY = 8, 3


class Tokens(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return DATASET

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "tokens": torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        }


def _sampler(dataset: Any) -> DistributedSampler[Any]:
    """Shard by torchrun's environment (the process group does not exist yet)."""
    world, rank = int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    return DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=0)


class ResumableLoader:
    """A sharded, shuffled loader that resumes where it stopped (``state_dict`` protocol).

    Its state is the number of batches training consumed in the current epoch (set by
    the module's ``training_step``: Lightning prefetches a batch ahead, and saves in the
    checkpoint callbacks' ``on_train_batch_end``, before the module's own hook runs); a
    loaded count is skipped at the next iteration. ``restore=False`` is the bug.
    """

    def __init__(self, dataset: Any, batch_size: int, *, restore: bool = True) -> None:
        self.sampler = _sampler(dataset)
        self.loader = DataLoader(dataset, batch_size=batch_size, sampler=self.sampler)
        self.dataset = dataset
        self.consumed = 0  # batches trained in this epoch (set by the module)
        self.restore = restore
        self._skip = 0

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        skip, self._skip = self._skip, 0
        self.consumed = skip
        for i, batch in enumerate(self.loader):
            if i >= skip:
                yield batch

    def state_dict(self) -> dict[str, int]:
        return {"consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if self.restore:
            self._skip = state["consumed"]


class TinyLM(pl.LightningModule):
    def __init__(self, loader: ResumableLoader) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.GELU())
            for _ in range(2)
        )
        self.out = nn.Linear(HIDDEN, VOCAB)
        self.resumable = loader

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = h + layer(h)
        return self.out(h)

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        self.resumable.consumed = batch_idx + 1
        tokens = batch["tokens"]
        logits = self(tokens)
        loss = nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten())
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        opt = torch.optim.AdamW(self.parameters(), lr=1e-3)
        sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.1, total_iters=STEPS)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class KillAt(pl.Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):  # type: ignore[no-untyped-def]
        if trainer.global_step == self.step and trainer.global_rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def main(run_dir: str, ckpt_dir: str, mode: str) -> None:
    pl.seed_everything(0, verbose=False)
    data = IndexedDataset(Tokens())
    loader = ResumableLoader(data, batch_size=2, restore=mode != "resume-loader-not-restored")
    callbacks: list[pl.Callback] = [
        FtauditCallback(run_dir, buffer_size=BUFFER, input_key="tokens"),
        pl.callbacks.ModelCheckpoint(
            dirpath=ckpt_dir, every_n_train_steps=SAVE_EVERY, save_top_k=-1
        ),
    ]
    if mode.startswith("kill@"):
        callbacks.append(KillAt(int(mode.split("@")[1])))
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=STEPS,
        accumulate_grad_batches=2,
        use_distributed_sampler=False,  # the loaders shard themselves
        callbacks=callbacks,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    ckpt = None
    if mode.startswith("resume"):
        ckpt = str(max(Path(ckpt_dir).glob("*.ckpt"), key=lambda p: p.stat().st_mtime))
    trainer.fit(TinyLM(loader), train_dataloaders=loader, ckpt_path=ckpt)


if __name__ == "__main__":
    main(*sys.argv[1:4])
    # as examples/torchrun_ddp.py: a process group left to interpreter exit lets gloo's
    # threads abort the process now and then (SIGABRT), which torchrun reports as a failure
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
