"""One incarnation of a torchrun job that resumes with another parallel layout (gloo, CPU).

Usage: torchrun --nproc-per-node N layout_child.py RUN_DIR STRATEGY LAST_STEP BUGS

Driven by ``test_layout_change.py``: each launch is the next incarnation of the same run
directory, resumed from the latest complete checkpoint, with the world size and the
strategy of that launch (``ddp``: DDP, every process its own cell; ``fsdp``:
``fully_shard``, one cell sharded over every process). It trains up to ``LAST_STEP`` and
saves a DCP checkpoint there, so the next launch reshards it. The global batch is the
same at any world size (``GLOBAL_BATCH`` samples per step, split over the ranks), and the
sample index is the stream position ``step * GLOBAL_BATCH + k``.

BUGS (comma-separated, ``none`` for the correct twin) plants real defects of the same
shape, each where the layout changes:

- ``unrestored``: in a single-process incarnation the process never loads the checkpoint
  (it trains on from its fresh initialisation);
- ``replay``: in a single-process incarnation the per-rank batch is kept and the stream
  position computed with the new world size, so the resumed stream replays samples and
  the next incarnation skips some;
- ``stale_shard``: in a two-process incarnation global rank 1 loads its part from the
  checkpoint before the one resumed from (its shard resumed from the wrong iteration).
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from ftaudit.trainer_hooks.torch import DistributedRun, install_witnesses, sample_token_ids
from tests.support.torch_models import VOCAB, lm_loss, make_model

GLOBAL_BATCH, SEQ, B = 4, 6, 40


def sample_tokens(indices: list[int]) -> torch.Tensor:
    """Sample i is a fixed random sequence, whatever rank, layout or step loads it."""
    return torch.stack(
        [
            torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            for i in indices
        ]
    )


def build(strategy: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = make_model(seed=0, layers=1)
    install_witnesses(model, B, layers="layers")
    if strategy == "ddp":
        model = DistributedDataParallel(model)
    elif strategy == "fsdp":
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)  # the witnesses are in the root's group: rows split over ranks
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def checkpoint_dir(run_dir: Path, iteration: int) -> Path:
    return run_dir / "ckpt" / str(iteration)


def main() -> str:
    run_dir, strategy, last = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    bugs = set(sys.argv[4].split(","))
    torch.set_num_threads(1)
    me, world = dist.get_rank(), dist.get_world_size()
    model, optimizer = build(strategy)
    run = DistributedRun.start(
        run_dir,
        model,
        optimizer,
        buffer_size=B,
        dataset_size=10_000,
        deterministic_order=True,
    )
    resumed = run.resume is not None
    if resumed and not ("unrestored" in bugs and world == 1):
        path = None
        if "stale_shard" in bugs and world == 2 and me == 1:  # an older checkpoint's part
            path = checkpoint_dir(run_dir, run.resume.ref.iteration - 2)
        run.load_checkpoint(path)
    per_rank = GLOBAL_BATCH // world
    if "replay" in bugs and resumed and world == 1:
        per_rank = GLOBAL_BATCH // 2  # the launch script's old per-rank batch

    for step in range(run.first_step, last + 1):
        first = step * world * per_rank + me * per_rank  # the stream position of my block
        indices = list(range(first, first + per_rank))
        info = run.allocate(step, 0, indices)
        with run.hooks.step(step, 0):
            toks = sample_tokens(indices)
            with run.hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                loss = lm_loss(model(toks), toks)
                optimizer.zero_grad()
                loss.backward()
            run.hooks.before_optimizer_step()
            optimizer.step()
            run.hooks.after_optimizer_step(info.stale_ids, checksum=True)
        run.end_attempt(step, 0)
    run.save_checkpoint(checkpoint_dir(run_dir, last), last, how="dcp")
    run.finish()
    return f"rank {me} of {world} ({strategy}) incarnation {run.incarnation} done"


if __name__ == "__main__":
    dist.init_process_group("gloo")
    said = main()
    # the model's reference cycles keep the process group alive past
    # destroy_process_group; freed at exit instead, gloo's threads abort the process now
    # and then ("terminate called without an active exception"): examples/torchrun_ddp.py
    gc.collect()
    dist.destroy_process_group()
    print(said, flush=True)
