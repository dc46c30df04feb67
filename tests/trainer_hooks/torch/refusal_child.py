"""One process (a world of 1): a witness whose rows are not whole per rank is refused
when the hooks attach (driven by test_dtensor.py)."""

from __future__ import annotations

import sys
import tempfile

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

from ftaudit.trainer_hooks import DriverSession
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses
from ftaudit.trainer_hooks.torch.dtensor import UnsupportedShardingError
from tests.support.torch_models import make_model


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        mesh = init_device_mesh("cpu", (1,))
        model = make_model(seed=0, layers=1)
        witnesses = install_witnesses(model, 16, layers="layers")
        head = witnesses.instances()["chunk0.head"]
        head.weight = torch.nn.Parameter(distribute_tensor(head.weight.data, mesh, [Shard(1)]))
        optimizer = torch.optim.Adam(model.parameters())
        driver = DriverSession.start(f"{tmp}/run", buffer_size=16)
        try:
            TrainerHooks.attach(
                f"{tmp}/run", driver.incarnation, cell=0, rank=0, model=model, optimizer=optimizer
            )
        except UnsupportedShardingError as exc:
            print(f"refused: {exc}")
        dist.destroy_process_group()
    sys.exit(0)


if __name__ == "__main__":
    main()
