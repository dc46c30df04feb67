"""A torchrun DDP job whose data comes from a ``DistributedSampler(shuffle=True)``.

Usage (2 processes, gloo): ``torchrun --nproc-per-node 2 --max-restarts 3
sampler_child.py RUN_DIR BUG``. In incarnation 0 rank 1 is SIGKILLed inside step
``KILL_STEP`` (a :class:`FaultSchedule` fault, logged before it fires); torchrun restarts
both processes and :class:`DistributedRun` resumes the next incarnation from the latest
complete checkpoint. ``BUG`` plants a defect in the resumed incarnation: ``epoch`` (it
forgets ``sampler.set_epoch``) or ``seed`` (it builds its sampler with a fresh seed);
``none`` is the correct twin. Every rank is its own cell (plain DDP) and fingerprints the
rows it feeds; rank 0 hosts the driver, declares the dataset's manifest and each epoch's
order, and logs the loader's state at saves and after the resume. The data goes through
a torchdata ``StatefulDataLoader``, whose state is saved with every checkpoint.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import Dataset
from torch.utils.data.distributed import DistributedSampler
from torchdata.stateful_dataloader import StatefulDataLoader

from ftaudit.dataset import build_manifest
from ftaudit.eventlog import LoaderWhen
from ftaudit.trainer_hooks import FaultSchedule
from ftaudit.trainer_hooks.torch import (
    DistributedRun,
    SamplerStream,
    install_witnesses,
    sample_token_ids,
)
from tests.support.torch_models import VOCAB, lm_loss, make_model

ITEMS, SEQ, BATCH, B, SEED = 24, 6, 3, 64, 17
STEPS, EVERY, KILL_STEP = 8, 3, 7  # checkpoints after steps 2 and 5; epoch 1 from step 4


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


def main(run_dir: Path, bug: str) -> None:
    rank = dist.get_rank()
    model = make_model(seed=0)
    install_witnesses(model, B, layers="layers")
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    faults = FaultSchedule.of([{"step": KILL_STEP, "mode": "sigkill"}] if rank == 1 else [])
    run = DistributedRun.start(
        run_dir,
        ddp,
        optimizer,
        buffer_size=B,
        dataset_size=ITEMS,
        deterministic_order=True,
        faults=faults,
    )
    dataset = TokenRows()
    if run.driver:
        run.driver.declare_manifest(build_manifest(dataset, description="TokenRows"))
    resumed = run.incarnation > 0
    seed = SEED + run.incarnation if bug == "seed" and resumed else SEED  # the defect
    sampler = DistributedSampler(dataset, rank=rank, shuffle=True, seed=seed)
    loader = StatefulDataLoader(dataset, batch_size=BATCH, sampler=sampler)
    stream = SamplerStream(sampler, batch_size=BATCH)

    if run.resume is not None:
        extra = run.load_checkpoint()
        if bug != "epoch":  # the defect: the sampler's epoch is not part of the loader state
            sampler.set_epoch(extra["epoch"])
        loader.load_state_dict(extra["loader"])
        if run.driver:
            run.driver.log_data(
                stream.loader_state(
                    iteration=run.resume.ref.iteration,
                    when=LoaderWhen.RESUMED,
                    next_step=run.first_step,
                    loader_state=loader.state_dict(),
                )
            )
    batches = iter(loader)
    declared: set[int] = set()
    for step in range(run.first_step, STEPS):
        epoch, batch = stream.locate(step)
        if batch == 0 and step != run.first_step:
            sampler.set_epoch(epoch)
            batches = iter(loader)
        if run.driver and epoch not in declared:
            run.driver.log_data(stream.data_order(epoch))
            declared.add(epoch)
        mine = stream.batch_positions(epoch, batch)  # this rank's rows: every W-th position
        info = run.allocate(step, 0, mine)
        x = next(batches)
        with run.hooks.step(step, 0):
            run.hooks.log_fingerprints(mine, x)
            with run.hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                lm_loss(ddp(x), x).backward()
            run.hooks.maybe_fault()  # mid-step: gradients exchanged, no optimizer step
            optimizer.step()
            optimizer.zero_grad()
            run.hooks.after_optimizer_step(info.stale_ids, checksum=True)
        run.end_attempt(step, 0)
        if (step + 1) % EVERY == 0:
            extra = {"loader": loader.state_dict(), "epoch": sampler.epoch}
            if run.driver:  # the state this checkpoint holds, logged before it is complete
                run.driver.log_data(
                    stream.loader_state(
                        iteration=step,
                        when=LoaderWhen.SAVED,
                        next_step=step + 1,
                        loader_state=extra["loader"],
                    )
                )
            run.save_checkpoint(run_dir / "ckpt" / f"{step}.pt", step, extra)
    run.finish()
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    print(f"rank {rank} incarnation {run.incarnation} restart {restart} done")


if __name__ == "__main__":
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    main(Path(sys.argv[1]), sys.argv[2])
    # Free the DDP model (its reducer holds the group) while the group is alive: freed
    # later, gloo's destructor joins a thread that waits for the GIL (a hang seen here)
    # or aborts the process. See examples/torchrun_ddp.py.
    gc.collect()
    dist.destroy_process_group()
