"""A plain torchrun DDP training (gloo, CPU) on :class:`DistributedRun`, one defect per ``--bug``.

Run by ``test_torchrun_evidence.py`` as
``python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 3
torchrun_evidence.py RUN_DIR [--bug NAME]``.

Every rank is a full DDP replica, so its own cell (rank 0 within it). ``DistributedRun``
hosts the driver on rank 0; rank 0 writes the checkpoint file (the usual DDP habit) and
every rank logs what it held at the save and what it loaded. In the first launch rank 1
is SIGKILLed in step 6 after its step; torchrun tears the job down and relaunches it, and
the relaunch resumes from the latest complete checkpoint. The defects are in the
script's own code around the run, as a user's would be.
"""

from __future__ import annotations

import argparse
import gc
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ftaudit.trainer_hooks import FaultSchedule, FaultSpec
from ftaudit.trainer_hooks.torch import DistributedRun, install_witnesses, sample_token_ids
from tests.support.torch_models import lm_loss, make_model, tokens

BUGS = (
    "restore_skipped",
    "checkpoint_late",
    "zero_grad_skipped",
    "stepped_twice",
    "scheduler_not_restored",
    "head_frozen",
)
B, SEQ, PER_RANK, STEPS, EVERY, KILL_STEP, DATASET = 64, 6, 4, 8, 3, 6, 64


class Warmup(torch.optim.lr_scheduler.LambdaLR):
    """The script's own scheduler: linear warmup over 4 steps.

    ``forgets_position`` is the ``scheduler_not_restored`` defect: an override of
    ``load_state_dict`` that keeps the fresh position (written for another version of
    the state), so a resumed run starts its warmup over.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, *, forgets_position: bool) -> None:
        self.forgets_position = forgets_position
        super().__init__(optimizer, lambda s: min(1.0, (s + 1) / 4))

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self.forgets_position:
            super().load_state_dict(state_dict)


def main(run_dir: Path, bug: str | None) -> None:
    me = dist.get_rank()

    model = make_model(seed=0)  # every replica starts from the same weights
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = Warmup(optimizer, forgets_position=bug == "scheduler_not_restored")
    kill = FaultSpec(step=KILL_STEP, mode="sigkill", cell=1, at="after_step", incarnation=0)
    run = DistributedRun.start(
        run_dir,
        model,  # DDP-wrapped below, after the load: each process is its own cell
        optimizer,
        buffer_size=B,
        dataset_size=DATASET,
        deterministic_order=True,
        faults=FaultSchedule(faults=(kill,)),
        stateful={"lr_scheduler": scheduler},
    )
    if run.resume is not None:
        # restore_skipped: only the rank that wrote the file loads it (DDP is built after
        # the load and broadcasts rank 0's weights, but not its optimizer or scheduler)
        if not (bug == "restore_skipped" and me == 1):
            run.load_checkpoint()
        if bug == "head_frozen":
            model.head.requires_grad_(False)  # a fine-tuning flag applied on resume
    ddp = DistributedDataParallel(model)
    corpus = tokens(DATASET, SEQ, seed=7)

    pending_save: int | None = None
    for step in range(run.first_step, STEPS):
        first = (step * dist.get_world_size() + me) * PER_RANK  # contiguous blocks per rank
        samples = list(range(first, first + PER_RANK))
        info = run.allocate(step, 0, samples)
        batch = corpus[[s % DATASET for s in samples]]
        with run.hooks.step(step, 0):
            if not (bug == "zero_grad_skipped" and step % 2 == 1):
                optimizer.zero_grad()
            with run.hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                lm_loss(ddp(batch), batch).backward()  # DDP all-reduces the gradients here
            run.hooks.before_optimizer_step()
            optimizer.step()
            if bug == "stepped_twice":
                optimizer.step()
            scheduler.step()
            run.hooks.after_optimizer_step(info.stale_ids, checksum=True)
            run.hooks.maybe_fault("after_step")
        run.end_attempt(step, 0)
        if pending_save is not None:
            run.save_checkpoint(checkpoint(run_dir, pending_save), pending_save)
            pending_save = None
        if (step + 1) % EVERY == 0:
            if bug == "checkpoint_late":
                pending_save = step  # an asynchronous save that lands a step late
            else:
                run.save_checkpoint(checkpoint(run_dir, step), step)
    run.finish()  # every writer closed before rank 0 records run_finished


def checkpoint(run_dir: Path, iteration: int) -> Path:
    """One full file per checkpoint, written by rank 0 (every rank logs what it held)."""
    return run_dir / "checkpoints" / f"{iteration}.pt"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--bug", choices=BUGS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    main(args.run_dir, args.bug)
    gc.collect()  # free the DDP model (it holds the group) first: see examples/torchrun_ddp.py
    dist.destroy_process_group()
