"""A plain torchrun DDP training script with ftaudit: the lines marked ``# ftaudit`` are all
it adds (a test counts them).

Run it:  torchrun --standalone --nproc-per-node 2 examples/torchrun_ddp.py RUN_DIR
Then:    ft-verify RUN_DIR

Run it again with the same RUN_DIR (or let ``torchrun --max-restarts N`` restart it after a
crash): the next incarnation resumes from the latest complete checkpoint in the log.
"""

from __future__ import annotations

import gc
import itertools
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import ftaudit.trainer_hooks.torch as fta  # ftaudit

B = 64  # witness ring: one step may use at most B - floor(0.7 * B) = 20 ids
STEPS, BATCH, SEQ, HIDDEN, VOCAB, N = 6, 4, 16, 32, 100, 10_000


class Tokens(Dataset):
    """Sample i is a fixed random sequence; items carry their index (the sample index)."""

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> tuple[int, torch.Tensor]:
        return i, torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))


class TinyLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(HIDDEN), nn.Linear(HIDDEN, HIDDEN), nn.GELU())
            for _ in range(2)
        )
        self.out = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for layer in self.layers:
            h = h + layer(h)
        return self.out(h)


def main(run_dir: Path) -> None:
    torch.manual_seed(0)
    model = TinyLM()
    fta.install_witnesses(model, B, layers="layers")  # ftaudit: before DDP and the optimizer
    model = DDP(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = dict(dataset_size=N, deterministic_order=True)  # ftaudit: what FT005 checks against
    run = fta.DistributedRun.start(run_dir, model, optimizer, buffer_size=B, **data)  # ftaudit
    if run.resume is not None:  # ftaudit: a restart resumes from the latest checkpoint
        run.load_checkpoint()  # ftaudit
    loader = DataLoader(Tokens(), BATCH, sampler=DistributedSampler(Tokens(), shuffle=False))
    batches = itertools.islice(loader, run.first_step, STEPS)  # skip what was trained

    for step, (indices, tokens) in enumerate(batches, start=run.first_step):
        info = run.allocate(step, 0, indices)  # ftaudit: witness ids of this rank's samples
        ids = fta.sample_token_ids(info.witness_ids, SEQ)  # ftaudit: one id per token
        with run.hooks.step(step, 0), run.hooks.batch(ids):  # ftaudit
            logits = model(tokens)
            loss = nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            run.hooks.after_optimizer_step(info.stale_ids, checksum=True)  # ftaudit
        run.end_attempt(step, 0)  # ftaudit: every rank's outcome to the driver on rank 0
        if step % 2 == 1:  # rank 0 saves; every rank logs what it holds
            run.save_checkpoint(run_dir / "ckpt" / f"{step}.pt", iteration=step)  # ftaudit
    run.finish()  # ftaudit


if __name__ == "__main__":
    dist.init_process_group("gloo")
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/torchrun_ddp"))
    # DDP's reference cycles keep the process group alive past destroy_process_group; freed
    # at interpreter exit instead, gloo's threads abort the process now and then
    # ("terminate called without an active exception"), and torchrun reports a failure.
    gc.collect()
    dist.destroy_process_group()
