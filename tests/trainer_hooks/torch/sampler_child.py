"""A torchrun DDP job whose data comes from a ``DistributedSampler(shuffle=True)``.

Usage (2 processes, gloo): ``torchrun --nproc-per-node 2 --max-restarts 1
sampler_child.py RUN_DIR STEPS KILL_STEP BUG`` where ``KILL_STEP`` (or -1) is the step at
which rank 1 SIGKILLs itself in the first incarnation (torchrun then restarts the job,
which resumes from the latest checkpoint), and ``BUG`` is ``none``, ``epoch`` (the
resumed job forgets ``sampler.set_epoch``) or ``seed`` (it builds its sampler with a
fresh seed). Every rank is its own cell (plain DDP: each rank a full replica); rank 0
hosts the driver. The data goes through a torchdata ``StatefulDataLoader``, whose state
is saved with every checkpoint, and every rank fingerprints the batches it feeds.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset
from torch.utils.data.distributed import DistributedSampler
from torchdata.stateful_dataloader import StatefulDataLoader

import ftaudit
from ftaudit.dataset import build_manifest
from ftaudit.eventlog import CheckpointRef, ChecksumWhen, LoaderWhen
from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import (
    SamplerStream,
    TrainerHooks,
    install_witnesses,
    sample_token_ids,
)
from tests.support.torch_models import VOCAB, lm_loss, make_model

ITEMS, SEQ, BATCH, B, SEED, EVERY = 24, 6, 3, 64, 17, 3


class TokenRows(Dataset):
    """Map-style: item i is a fixed random row of token ids."""

    def __init__(self) -> None:
        self.rows = torch.randint(
            0, VOCAB, (ITEMS, SEQ), generator=torch.Generator().manual_seed(5)
        )

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.rows[i]


def latest_checkpoint(run_dir: Path) -> CheckpointRef | None:
    if not (run_dir / "events").is_dir():
        return None
    with ftaudit.connect(run_dir) as con:
        row = con.execute(
            "SELECT iteration, incarnation FROM checkpoint_saved WHERE complete "
            "ORDER BY iteration DESC, incarnation DESC LIMIT 1"
        ).fetchone()
    return None if row is None else CheckpointRef(iteration=row[0], incarnation=row[1])


def share(value: object) -> object:
    """Rank 0's ``value`` on every rank."""
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def main() -> None:
    run_dir, steps, kill_step, bug = (
        Path(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4],
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = TokenRows()

    driver = None
    if rank == 0:
        driver = DriverSession.start(
            run_dir,
            buffer_size=B,
            resume_from=latest_checkpoint(run_dir),
            dataset_size=ITEMS,
            deterministic_order=True,
        )
        driver.declare_manifest(build_manifest(dataset, description="TokenRows"))
    incarnation, first, ref, stale = share(
        (driver.incarnation, driver.first_step, driver.resume_from, driver.resume_stale_ids)
        if driver
        else None
    )
    seed = SEED + incarnation if bug == "seed" else SEED  # the defect: a seed per launch
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank, shuffle=True, seed=seed)
    loader = StatefulDataLoader(dataset, batch_size=BATCH, sampler=sampler)
    stream = SamplerStream(sampler, batch_size=BATCH)

    model = make_model(seed=0)
    install_witnesses(model, B, layers="layers")
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    hooks = TrainerHooks.attach(
        run_dir, incarnation, cell=rank, rank=0, model=ddp, optimizer=optimizer
    )
    ckpt = run_dir / "checkpoints"

    if ref is not None:
        meta = hooks.load_checkpoint(
            ckpt / f"{ref.iteration}.pt", checkpoint=ref, resume_stale_ids=stale
        )
        if bug != "epoch":  # the defect: the sampler's epoch is not part of the loader state
            sampler.set_epoch(meta["extra"]["epoch"])
        loader.load_state_dict(meta["extra"]["loader"])
        if driver:
            driver.log_data(
                stream.loader_state(
                    iteration=ref.iteration,
                    when=LoaderWhen.RESUMED,
                    next_step=first,
                    loader_state=loader.state_dict(),
                )
            )
    batches = iter(loader)
    declared: set[int] = set()
    for step in range(first, steps):
        epoch, batch = stream.locate(step)
        if batch == 0 and step != first:
            sampler.set_epoch(epoch)
            batches = iter(loader)
        positions = stream.step_positions(epoch, batch)
        if driver:
            if epoch not in declared:
                driver.log_data(stream.data_order(epoch))
                declared.add(epoch)
            info = driver.allocate(step, 0, positions)
        ids, stale_ids = share((info.witness_ids, info.stale_ids) if driver else None)
        mine = stream.batch_positions(epoch, batch)
        local_ids = [ids[int(p - positions[0])] for p in mine]
        x = next(batches)
        with hooks.step(step, 0):
            hooks.log_fingerprints(mine, x)
            if incarnation == 0 and step == kill_step and rank == 1:
                hooks.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            with hooks.batch(sample_token_ids(local_ids, SEQ)):
                lm_loss(ddp(x), x).backward()
            optimizer.step()
            optimizer.zero_grad()
            hooks.after_optimizer_step(stale_ids, checksum=True)
        dist.barrier()
        if driver:
            driver.end_attempt(step, 0, {c: ranks("normal") for c in range(world)})
        if (step + 1) % EVERY == 0:
            extra = {"loader": loader.state_dict(), "epoch": sampler.epoch}
            with hooks.step(step, 0):
                if rank == 0:
                    hooks.save_checkpoint(ckpt / f"{step}.pt", step, extra)
                else:
                    hooks.log_checksums(
                        ChecksumWhen.AT_SAVE,
                        checkpoint=CheckpointRef(iteration=step, incarnation=incarnation),
                    )
                    hooks.run.record_checkpoint(step, source=hooks.identity)
            dist.barrier()
            if driver:
                driver.log_data(
                    stream.loader_state(
                        iteration=step,
                        when=LoaderWhen.SAVED,
                        next_step=step + 1,
                        loader_state=extra["loader"],
                    )
                )
                driver.record_checkpoint(step, path=str(ckpt / f"{step}.pt"))
    hooks.close()
    if driver:
        driver.finish()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
