"""Which cell and rank a ``torch.distributed`` process is, for each parallel strategy.

A cell is one data-parallel replica of the whole model state; ranks within a cell hold
different parts of it and are never compared, while the same rank of every cell must
hold bitwise-equal state (FT006). So the mapping decides what the verifier compares:

- plain DDP: every process holds the whole model, so every process is its own cell
  (rank 0 of it). Mapping DDP to one cell of ``world`` ranks would switch the
  cross-replica and restore comparisons off between the ranks.
- FSDP (``fully_shard`` on a 1-D mesh): one replica sharded over every process: one
  cell, the process's shard index is its rank.
- HSDP (``fully_shard`` on a 2-D mesh, replicate x shard): the replica group is the cell
  and the shard group the ranks within it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.torch.dtensor import is_dtensor

Strategy = Literal["ddp", "fsdp", "hsdp"]


@dataclass(frozen=True)
class CellMap:
    """This process's place: ``cell`` (replica) and ``rank`` within it, among ``cells``."""

    strategy: Strategy
    cell: int
    rank: int
    cells: int
    ranks_per_cell: int

    @classmethod
    def ddp(cls) -> CellMap:
        """Every process a full replica: cell = global rank, rank 0 within it."""
        world, me = dist.get_world_size(), dist.get_rank()
        return cls("ddp", cell=me, rank=0, cells=world, ranks_per_cell=1)

    @classmethod
    def fsdp(cls, mesh: DeviceMesh | None = None) -> CellMap:
        """One replica sharded over the mesh (default: every process)."""
        if mesh is None:
            world, me = dist.get_world_size(), dist.get_rank()
        else:
            world, me = mesh.size(), mesh.get_local_rank()
        return cls("fsdp", cell=0, rank=me, cells=1, ranks_per_cell=world)

    @classmethod
    def hsdp(cls, mesh: DeviceMesh) -> CellMap:
        """A 2-D mesh ``(replicate, shard)``: replica index = cell, shard index = rank."""
        if mesh.ndim != 2:
            raise UsageError(f"HSDP needs a 2-D (replicate, shard) mesh, not {mesh.ndim}-D")
        return cls(
            "hsdp",
            cell=mesh.get_local_rank(0),
            rank=mesh.get_local_rank(1),
            cells=mesh.size(0),
            ranks_per_cell=mesh.size(1),
        )

    @classmethod
    def of(cls, model: nn.Module, strategy: Strategy | None = None) -> CellMap:
        """The mapping for ``model`` as it is wrapped: DDP (or a plain replicated model),
        or ``fully_shard`` on a 1-D (FSDP) or 2-D (HSDP) mesh, read from its DTensors."""
        mesh = next((p.device_mesh for p in model.parameters() if is_dtensor(p)), None)
        found: Strategy = "ddp" if mesh is None else ("hsdp" if mesh.ndim == 2 else "fsdp")
        if strategy is not None and strategy != found:
            raise UsageError(
                f"strategy {strategy!r} given, but the model is wrapped for {found!r} "
                f"({'no DTensor parameters' if mesh is None else f'a {mesh.ndim}-D mesh'})"
            )
        if mesh is None:
            return cls.ddp()
        return cls.hsdp(mesh) if mesh.ndim == 2 else cls.fsdp(mesh)
