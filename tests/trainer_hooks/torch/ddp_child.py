"""One rank of a 2-process gloo DDP step with witnesses (driven by test_ddp.py).

Usage: ddp_child.py RUN_DIR RANK STORE_FILE ALLOCATION_JSON OUT_FILE
STORE_FILE is the ranks' rendezvous (a file, new to both: no port to race for).
ALLOCATION_JSON holds the global batch's witness ids and the stale ids; this rank trains
its half of the batch, then saves its witness rows to OUT_FILE.
"""

from __future__ import annotations

import gc
import json
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids
from tests.support.torch_models import lm_loss, make_model, tokens

WORLD, SEQ = 2, 6


def main(run_dir: str, rank: int, allocation: dict, out: str) -> None:
    model = make_model(seed=0)  # same initial weights on both ranks
    witnesses = install_witnesses(model, allocation["buffer_size"], layers="layers")
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters(), lr=1e-2)
    hooks = TrainerHooks.attach(run_dir, 0, cell=0, rank=rank, model=ddp, optimizer=optimizer)

    ids = allocation["witness_ids"]
    local = ids[rank * len(ids) // WORLD : (rank + 1) * len(ids) // WORLD]
    toks = tokens(len(ids), SEQ, seed=7)[rank * len(local) : (rank + 1) * len(local)]
    with hooks.step(0, 0):
        with hooks.batch(sample_token_ids(local, SEQ)):
            lm_loss(ddp(toks), toks).backward()
        optimizer.step()
        hooks.after_optimizer_step(allocation["stale_ids"], checksum=True)
    torch.save({n: w.weight.detach() for n, w in witnesses.instances().items()}, out)
    hooks.close()


if __name__ == "__main__":
    rank, store = int(sys.argv[2]), sys.argv[3]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    main(sys.argv[1], rank, json.loads(sys.argv[4]), sys.argv[5])
    gc.collect()  # free the DDP model (it holds the group) first: see examples/torchrun_ddp.py
    dist.destroy_process_group()
