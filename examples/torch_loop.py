"""A plain-PyTorch training loop wired to ftaudit: witness ids, snapshots, a checkpoint.

Run it:  python examples/torch_loop.py [RUN_DIR]

The driver side (allocation, acceptance, checkpoints) and the worker side (witness in
the model, clearing, checksums) live in one process here; in a real job the driver
sends each worker the witness ids of its samples and the attempt's stale ids.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch
from torch import nn

import ftaudit
from ftaudit.dataset import build_manifest
from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids

BUFFER_SIZE = 64  # witness ring: one step may use at most B - floor(0.7 * B) = 20 ids
BATCH, SEQ, HIDDEN, VOCAB = 8, 16, 32, 100


class TinyLM(nn.Module):
    """An ordinary model: ftaudit never edits its code."""

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
    # head witness at the input of model.layers, tail witness at its output
    install_witnesses(model, BUFFER_SIZE, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)  # built after installing

    # the dataset: 10,000 rows of token ids (any map-style dataset works the same way)
    data = torch.randint(0, VOCAB, (10_000, SEQ), generator=torch.Generator().manual_seed(1))
    driver = DriverSession.start(run_dir, buffer_size=BUFFER_SIZE, dataset_size=len(data))
    driver.declare_manifest(build_manifest(data))  # every item's fingerprint, for FT008
    hooks = TrainerHooks.attach(
        run_dir, driver.incarnation, cell=0, rank=0, model=model, optimizer=optimizer
    )

    consumed = 0  # global sample index of the next sample
    for step in range(4):
        attempt = 0
        samples = list(range(consumed, consumed + BATCH))
        info = driver.allocate(step, attempt, samples)  # logs WitnessAllocated

        tokens = data[samples]  # sample index i is item i mod N (no shuffle here)
        with hooks.step(step, attempt), hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
            hooks.log_fingerprints(samples, tokens)  # what the model really receives
            logits = model(tokens)
            loss = nn.functional.cross_entropy(
                logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten()
            )
            optimizer.zero_grad()
            loss.backward()
            hooks.before_optimizer_step()  # the witness gradient: this attempt's ids only
            optimizer.step()
            hooks.after_optimizer_step(info.stale_ids)  # snapshot, then clear stale rows
            hooks.log_metrics({"loss": loss.item()})

        accepted = driver.end_attempt(step, attempt, {0: ranks("normal")})
        assert accepted
        consumed += BATCH

        if step == 1:  # a durable checkpoint: every rank saves, then the driver marks it
            with hooks.step(step, attempt):
                hooks.save_checkpoint(run_dir / "ckpt" / f"iter{step}.pt", iteration=step)
            driver.record_checkpoint(step, path=str(run_dir / "ckpt"))

    hooks.close()
    driver.finish()

    with ftaudit.connect(run_dir) as con:
        print(
            con.sql(
                """
                SELECT step, attempt, instance,
                       len(nonzero_ids.starts) AS runs,
                       list_sum(nonzero_ids.lengths) AS nonzero,
                       list_sum(stale_ids.lengths) AS stale
                FROM witness_snapshot ORDER BY step, instance
                """
            )
        )


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "run")
