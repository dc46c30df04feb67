"""A torchrun training script (driven by test_torchrun.py): 2 gloo processes on CPU.

Usage: torchrun --nproc-per-node 2 --max-restarts 1 torchrun_child.py RUN_DIR STRATEGY BUGS

STRATEGY: ``ddp`` (rank 0 saves one file), ``fsdp`` (``fully_shard``, DCP), ``fsdp_full``
(``fully_shard``, rank 0 saves the full state dict) or ``ddp_dcp`` (DDP with DCP).

In incarnation 0 global rank 1 is SIGKILLed mid-step after the second checkpoint; torchrun
restarts both processes and the next incarnation resumes from the latest complete
checkpoint. BUGS (comma-separated) plants defects in the resumed incarnation:
``stale_restore`` (global rank 1 loads the checkpoint before the one resumed from),
``skip_batch`` (the resumed data stream starts one batch late); ``none`` is the correct
twin.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from ftaudit.trainer_hooks import FaultSchedule
from ftaudit.trainer_hooks.torch import DistributedRun, install_witnesses, sample_token_ids
from tests.support.torch_models import VOCAB, lm_loss, make_model

STEPS, BATCH, SEQ, B = 6, 2, 6, 40
CHECKPOINT_EVERY = 2  # checkpoints at iterations 1 and 3
KILL_STEP = 4  # after the checkpoint of iteration 3


def sample_tokens(indices: list[int]) -> torch.Tensor:
    """Sample i is a fixed random sequence, whatever rank or step loads it."""
    return torch.stack(
        [
            torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            for i in indices
        ]
    )


def build(strategy: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = make_model(seed=0, layers=1)
    install_witnesses(model, B, layers="layers")
    if strategy in ("ddp", "ddp_dcp"):
        model = DistributedDataParallel(model)
    elif strategy in ("fsdp", "fsdp_full"):
        for layer in model.layers:
            fully_shard(layer)
        fully_shard(model)  # the witnesses are in the root's group: rows split over ranks
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def checkpoint_path(run_dir: Path, strategy: str, iteration: int) -> Path:
    """DCP: a directory per checkpoint; DDP: one full file that rank 0 writes."""
    name = str(iteration) if strategy in ("fsdp", "ddp_dcp") else f"{iteration}.pt"
    return run_dir / "ckpt" / name


def main() -> None:
    run_dir, strategy, bugs = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    me, world = dist.get_rank(), dist.get_world_size()
    model, optimizer = build(strategy)
    faults = FaultSchedule.of([{"step": KILL_STEP, "mode": "sigkill"}] if me == 1 else [])
    run = DistributedRun.start(
        run_dir,
        model,
        optimizer,
        buffer_size=B,
        dataset_size=10_000,
        deterministic_order=True,
        faults=faults,
    )
    if run.resume is not None:
        path = None
        if "stale_restore" in bugs and me == 1:  # an older checkpoint than the log says
            path = checkpoint_path(run_dir, strategy, run.resume.ref.iteration - CHECKPOINT_EVERY)
        run.load_checkpoint(path)
    late = 1 if "skip_batch" in bugs and run.incarnation > 0 else 0

    for step in range(run.first_step, STEPS):
        first = (step + late) * world * BATCH + me * BATCH  # contiguous blocks per rank
        indices = list(range(first, first + BATCH))
        info = run.allocate(step, 0, indices)
        with run.hooks.step(step, 0):
            toks = sample_tokens(indices)
            with run.hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                loss = lm_loss(model(toks), toks)
                optimizer.zero_grad()
                loss.backward()
            run.hooks.maybe_fault()  # mid-step: gradients exchanged, no optimizer step
            optimizer.step()
            run.hooks.after_optimizer_step(info.stale_ids, checksum=True)
            run.hooks.log_metrics({"loss": loss.item()})
        run.end_attempt(step, 0)
        if step % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
            how = "dcp" if strategy in ("fsdp", "ddp_dcp") else "full"
            run.save_checkpoint(checkpoint_path(run_dir, strategy, step), step, how=how)
    run.finish()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    print(f"rank {me} incarnation {run.incarnation} restart {restart} done")


if __name__ == "__main__":
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    main()
    gc.collect()  # free the wrapped model (it holds the group) first: see examples/torchrun_ddp.py
    dist.destroy_process_group()
