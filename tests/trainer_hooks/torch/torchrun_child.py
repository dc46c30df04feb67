"""A torchrun training script (driven by test_torchrun.py): gloo processes on CPU.

Usage: torchrun --nproc-per-node N --max-restarts R torchrun_child.py STRATEGY RUN_DIR BUGS
[RUN_DIR BUGS ...]

STRATEGY: ``ddp`` (rank 0 saves one file), ``fsdp`` (``fully_shard``, DCP), ``fsdp_full``
(``fully_shard``, rank 0 saves the full state dict), ``ddp_dcp`` (DDP with DCP) or
``hsdp`` (``fully_shard`` on a 2-D ``(replicate, shard)`` mesh of 2 shards, DCP).

In incarnation 0 global rank 1 is SIGKILLed mid-step after the second checkpoint; torchrun
restarts every process and the next incarnation resumes from the latest complete
checkpoint. BUGS (comma-separated) plants defects in the resumed incarnation:
``stale_restore`` (the last global rank loads the checkpoint before the one resumed
from), ``skip_batch`` (the resumed data stream starts one batch late); ``none`` is the
correct twin.

Several (RUN_DIR, BUGS) jobs run one after the other in one launch (one torchrun restart
each, so ``--max-restarts`` at least the number of jobs): a job whose directory holds the
``done`` marker is skipped, so after the restart that killed job ``k`` the processes
finish job ``k`` and go on to job ``k + 1``.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
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


DCP_STRATEGIES = ("fsdp", "ddp_dcp", "hsdp")
SHARDS = 2  # HSDP: ranks per replica; the replicas are world // SHARDS


def build(strategy: str) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = make_model(seed=0, layers=1)
    install_witnesses(model, B, layers="layers")
    if strategy in ("ddp", "ddp_dcp"):
        model = DistributedDataParallel(model)
    elif strategy in ("fsdp", "fsdp_full", "hsdp"):
        mesh = None
        if strategy == "hsdp":  # replicate over dim 0, shard over dim 1 (HSDP placement)
            world = dist.get_world_size()
            mesh = init_device_mesh(
                "cpu", (world // SHARDS, SHARDS), mesh_dim_names=("replicate", "shard")
            )
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)  # the witnesses are in the root's group: rows split
    else:
        raise ValueError(f"unknown strategy {strategy!r}")
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def checkpoint_path(run_dir: Path, strategy: str, iteration: int) -> Path:
    """DCP: a directory per checkpoint; DDP: one full file that rank 0 writes."""
    name = str(iteration) if strategy in DCP_STRATEGIES else f"{iteration}.pt"
    return run_dir / "ckpt" / name


def train(run_dir: Path, strategy: str, bugs: list[str]) -> None:
    """One job: train (or resume) ``run_dir`` to the end; SIGKILLed once in incarnation 0."""
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
        if "stale_restore" in bugs and me == world - 1:  # older than the log says
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
            how = "dcp" if strategy in DCP_STRATEGIES else "full"
            run.save_checkpoint(checkpoint_path(run_dir, strategy, step), step, how=how)
    run.finish()
    if me == 0:  # the job is over: a later round of this launch goes on to the next job
        (run_dir / "done").touch()
    dist.barrier()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    print(f"rank {me} {run_dir.name} incarnation {run.incarnation} restart {restart} done")


def main() -> None:
    strategy, jobs = sys.argv[1], sys.argv[2:]
    for run_dir, bugs in zip(jobs[::2], jobs[1::2], strict=True):
        if not (Path(run_dir) / "done").exists():
            train(Path(run_dir), strategy, bugs.split(","))


if __name__ == "__main__":
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    main()
    gc.collect()  # free the wrapped model (it holds the group) first: see examples/torchrun_ddp.py
    dist.destroy_process_group()
