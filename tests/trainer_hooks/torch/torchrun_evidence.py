"""A plain torchrun DDP training (gloo, CPU) with the hooks, one defect per ``--bug``.

Run by ``test_torchrun_evidence.py`` as
``python -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 1
torchrun_evidence.py RUN_DIR [--bug NAME]``.

Every rank is a full DDP replica, so its own cell (rank 0 within it). Rank 0 hosts the
driver and saves the checkpoint file (the usual DDP habit); every rank logs what it held
at the save and what it loaded. In the first launch rank 1 is SIGKILLed in step 6 after
its step; torchrun tears the job down and relaunches it, and the relaunch resumes from
the latest complete checkpoint. The checkpoint code is the script's own (not the hooks'
helpers), as a user's would be; the defects are in it.
"""

from __future__ import annotations

import argparse
import os
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import ftaudit
from ftaudit.eventlog.events import CheckpointRef, ChecksumWhen
from ftaudit.trainer_hooks import DriverSession, FaultSchedule, FaultSpec, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids
from tests.support.torch_models import lm_loss, make_model, tokens

BUGS = (
    "restore_skipped",
    "checkpoint_late",
    "zero_grad_skipped",
    "stepped_twice",
    "scheduler_not_restored",
    "head_frozen",
)
B, SEQ, PER_STEP, STEPS, EVERY, KILL_STEP, DATASET = 64, 6, 8, 8, 3, 6, 64


def latest_checkpoint(run_dir: str) -> CheckpointRef | None:
    """The newest complete checkpoint the log holds (None: start fresh)."""
    if not (Path(run_dir) / "events").is_dir():
        return None
    with ftaudit.connect(run_dir) as con:
        row = con.execute(
            "SELECT iteration, incarnation FROM checkpoint_saved WHERE complete "
            "ORDER BY iteration DESC, incarnation DESC LIMIT 1"
        ).fetchone()
    return None if row is None else CheckpointRef(iteration=row[0], incarnation=row[1])


def warmup(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))


def broadcast(value: object) -> object:
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def init_process_group() -> tuple[int, int]:
    """``init_process_group("gloo")`` on a store prefixed by the torchrun restart round.

    The rendezvous store outlives a restart; without the prefix a relaunched rank can
    read the address its peer published in the killed round and fail to connect to it.
    """
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=rank == 0 and not agent_store,
        timeout=timedelta(seconds=300),
    )
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    dist.init_process_group(
        "gloo",
        store=dist.PrefixStore(f"ftaudit/round{restart}", store),
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=300),
    )
    return rank, world


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--bug", choices=BUGS)
    args = parser.parse_args()
    bug, run_dir = args.bug, args.run_dir
    torch.set_num_threads(1)
    rank, world = init_process_group()

    driver = None
    if rank == 0:
        driver = DriverSession.start(
            run_dir,
            buffer_size=B,
            resume_from=latest_checkpoint(run_dir),
            dataset_size=DATASET,
            deterministic_order=True,
        )
        start = (driver.incarnation, driver.resume_from, driver.resume_stale_ids)
    incarnation, resume, stale_at_resume = broadcast(start if rank == 0 else None)  # type: ignore[misc]

    model = make_model(seed=0)  # every replica starts from the same weights
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = warmup(optimizer)
    kill = FaultSpec(step=KILL_STEP, mode="sigkill", cell=1, at="after_step", incarnation=0)
    hooks = TrainerHooks.attach(
        run_dir,
        incarnation,
        cell=rank,
        rank=0,
        model=model,
        optimizer=optimizer,
        faults=FaultSchedule(faults=(kill,)),
        stateful={"lr_scheduler": scheduler},
    )
    ckpt_dir = Path(run_dir) / "checkpoints"
    if resume is not None:
        with hooks.step(resume.iteration, 0):
            if not (bug == "restore_skipped" and rank == 1):
                state = torch.load(
                    ckpt_dir / f"{resume.iteration}.pt", map_location="cpu", weights_only=True
                )
                model.load_state_dict(state["model"])
                optimizer.load_state_dict(state["optimizer"])
                if bug != "scheduler_not_restored":
                    scheduler.load_state_dict(state["scheduler"])
                hooks.log_checksums(ChecksumWhen.AFTER_LOAD, checkpoint=resume)
                hooks.clear_at_resume(stale_at_resume)
            if bug == "head_frozen":
                model.head.requires_grad_(False)  # a fine-tuning flag applied on resume
    ddp = DistributedDataParallel(model)
    corpus = tokens(DATASET, SEQ, seed=7)

    first = resume.iteration + 1 if resume is not None else 0
    pending_save: int | None = None
    for step in range(first, STEPS):
        samples = list(range(step * PER_STEP, (step + 1) * PER_STEP))
        info = driver.allocate(step, 0, samples) if driver is not None else None
        ids, stale = broadcast((info.witness_ids, info.stale_ids) if info else None)  # type: ignore[misc]
        part = slice(rank * PER_STEP // world, (rank + 1) * PER_STEP // world)
        batch = corpus[[s % DATASET for s in samples[part]]]
        with hooks.step(step, 0):
            if not (bug == "zero_grad_skipped" and step % 2 == 1):
                optimizer.zero_grad()
            with hooks.batch(sample_token_ids(ids[part], SEQ)):
                lm_loss(ddp(batch), batch).backward()  # DDP all-reduces the gradients here
            hooks.before_optimizer_step()
            optimizer.step()
            if bug == "stepped_twice":
                optimizer.step()
            scheduler.step()
            hooks.after_optimizer_step(stale, checksum=True)
            hooks.maybe_fault("after_step")
        dist.barrier()
        if driver is not None:
            driver.end_attempt(step, 0, {c: ranks("normal") for c in range(world)})
        if pending_save is not None:
            save(hooks, driver, pending_save, ckpt_dir, model, optimizer, scheduler)
            pending_save = None
        if (step + 1) % EVERY == 0:
            if bug == "checkpoint_late":
                pending_save = step  # an asynchronous save that lands a step late
            else:
                save(hooks, driver, step, ckpt_dir, model, optimizer, scheduler)
    hooks.close()
    dist.barrier()  # every writer closed before run_finished records their final heads
    if driver is not None:
        driver.finish()
    dist.destroy_process_group()


def save(
    hooks: TrainerHooks,
    driver: DriverSession | None,
    iteration: int,
    ckpt_dir: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> None:
    """Rank 0 writes the file; every rank logs what it held (so every loader compares)."""
    ref = CheckpointRef(iteration=iteration, incarnation=hooks.run.incarnation)
    with hooks.step(iteration, 0):
        if driver is not None:
            ckpt_dir.mkdir(parents=True, exist_ok=True)
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
            }
            tmp = ckpt_dir / f".{iteration}.pt.tmp"
            torch.save(state, tmp)
            os.replace(tmp, ckpt_dir / f"{iteration}.pt")
        hooks.log_checksums(ChecksumWhen.AT_SAVE, checkpoint=ref)
        hooks.run.record_checkpoint(iteration, source=hooks.identity)
    dist.barrier()
    if driver is not None:
        driver.record_checkpoint(iteration, path=str(ckpt_dir / f"{iteration}.pt"))


if __name__ == "__main__":
    main()
