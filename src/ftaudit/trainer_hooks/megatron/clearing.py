"""Witness rows in Megatron-core's optimizers: read from the fp32 main params, clear everywhere.

With the ``DistributedOptimizer`` every data-parallel rank steps only its shard of the
flattened parameter buffer, so a witness ``[B, 1]`` may be split between ranks at any
row (a shard boundary can fall inside it). Each rank reads the nonzero rows of its fp32
main-param shard, maps them to global rows with the shard's offset in the parameter,
and the ranks of the data-parallel group exchange their runs (O(runs) objects), so every
rank reports the whole witness. Clearing zeroes the stale rows in the model parameter
(every rank holds it whole), in this rank's main-param shard and in the inner
optimizer's moments of that shard.

Supported: ``DistributedOptimizer``, ``Float16OptimizerWithFloat16Params``,
``FP32Optimizer`` and a ``ChainedOptimizer`` of them, around torch ``Adam``/``AdamW``/
``SGD`` or the fused Adams of Apex and Transformer Engine (state ``exp_avg`` and
``exp_avg_sq``). Anything else (the precision-aware optimizer that keeps main params
inside Transformer Engine, CPU offloading, the layer-wise optimizer) is refused with
:class:`~ftaudit.trainer_hooks.torch.UnsupportedOptimizerError`; Megatron-FSDP with
:class:`~ftaudit.trainer_hooks.megatron.UnsupportedMegatronSetupError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from megatron.core.optimizer import ChainedOptimizer, DistributedOptimizer, MegatronOptimizer
from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params, FP32Optimizer

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.trainer_hooks.megatron.support import refuse_megatron_fsdp
from ftaudit.trainer_hooks.megatron.witnesses import MegatronWitnesses
from ftaudit.trainer_hooks.torch.clearing import (
    UnsupportedOptimizerError,
    as_runs,
    nonzero_rows,
    row_state_keys,
    union_runs,
    zero_rows,
)

FUSED_ADAM_KEYS = ("exp_avg", "exp_avg_sq")
"""State of Apex's and Transformer Engine's ``FusedAdam`` (not torch subclasses)."""


@dataclass
class RowShard:
    """The rows ``offset .. offset + len(main) - 1`` of one witness that this rank steps."""

    instance: str
    main: torch.Tensor
    """The tensor the inner optimizer steps, flat: an fp32 main copy (or the fp32 param)."""
    offset: int
    state: dict[str, Any]
    """The inner optimizer's state of ``main`` (looked up anew: a checkpoint load replaces it)."""
    keys: tuple[str, ...]
    owner: int
    """Index of the member optimizer (in chain order) holding this shard."""


def optimizer_members(optimizer: Any) -> list[MegatronOptimizer]:
    if type(optimizer) is ChainedOptimizer:
        return [m for opt in optimizer.chained_optimizers for m in optimizer_members(opt)]
    if isinstance(optimizer, DistributedOptimizer):
        refuse_megatron_fsdp(getattr(optimizer, "ddp_config", None), "the DistributedOptimizer")
        return [optimizer]
    if isinstance(optimizer, Float16OptimizerWithFloat16Params):
        return [optimizer]
    if isinstance(optimizer, FP32Optimizer):
        return [optimizer]
    raise UnsupportedOptimizerError(
        f"{type(optimizer).__name__} is not supported by the Megatron witness clearing: use "
        "the DistributedOptimizer, Float16OptimizerWithFloat16Params or FP32Optimizer "
        "(alone or in a ChainedOptimizer)"
    )


def _state_keys(inner: torch.optim.Optimizer) -> tuple[str, ...]:
    module = type(inner).__module__
    if type(inner).__name__ == "FusedAdam" and module.startswith(("apex", "transformer_engine")):
        return FUSED_ADAM_KEYS
    return row_state_keys(inner)


def main_param_pairs(
    opt: MegatronOptimizer,
) -> Iterable[tuple[torch.Tensor, torch.Tensor | None, int]]:
    """(model param, the tensor the inner optimizer steps, its offset in the param)."""
    if isinstance(opt, DistributedOptimizer):
        groups = (
            (opt.model_float16_groups, opt.shard_fp32_from_float16_groups),
            (opt.model_fp32_groups, opt.shard_fp32_groups),
        )
        for models, mains in groups:
            for model_group, main_group in zip(models, mains, strict=True):
                for param, main in zip(model_group, main_group, strict=True):
                    start = opt._get_model_param_range_map(param)["param"].start
                    yield param, main, start
    elif isinstance(opt, Float16OptimizerWithFloat16Params):
        for model_group, main_group in zip(
            opt.float16_groups, opt.fp32_from_float16_groups, strict=True
        ):
            for param, main in zip(model_group, main_group, strict=True):
                yield param, main, 0
        for group in opt.fp32_from_fp32_groups:
            for param in group:
                yield param, param, 0
    else:
        for group in opt.optimizer.param_groups:
            for param in group["params"]:
                yield param, param, 0


class MegatronWitnessClearer:
    """Snapshots and clears the witness rows of a Megatron model through its optimizer.

    Same interface as :class:`ftaudit.trainer_hooks.torch.WitnessClearer` (``snapshot``,
    ``zero``), so :class:`ftaudit.trainer_hooks.torch.TrainerHooks` takes it as
    ``clearer=``. Every rank of the data-parallel group must call ``snapshot`` (it
    exchanges the rows of the shards).
    """

    def __init__(self, witnesses: MegatronWitnesses, optimizer: Any) -> None:
        self.witnesses = witnesses
        self.members = optimizer_members(optimizer)
        self.keys = [
            None if getattr(opt, "is_stub_optimizer", False) else _state_keys(opt.optimizer)
            for opt in self.members
        ]
        self.shards()  # refuse a layout it cannot clear now, not after the first step

    def shards(self) -> list[RowShard]:
        """This rank's shards of every witness, with their optimizer state."""
        names = {id(w.weight): n for n, w in self.witnesses.instances().items()}
        out: list[RowShard] = []
        for index, (opt, keys) in enumerate(zip(self.members, self.keys, strict=True)):
            if keys is None:
                continue
            for param, main, offset in main_param_pairs(opt):
                name = names.get(id(param))
                if name is None:
                    continue
                if main is None:
                    raise UnsupportedOptimizerError(
                        f"witness {name}: the optimizer keeps no main param for it here "
                        "(precision-aware optimizer?): its rows cannot be read or cleared"
                    )
                state = opt.optimizer.state.get(main, {})
                out.append(RowShard(name, main.view(-1), offset, state, keys, index))
        return out

    def _group(self, opt: MegatronOptimizer) -> Any:
        if isinstance(opt, DistributedOptimizer) and dist.is_initialized():
            return opt.data_parallel_group
        return None

    def snapshot(self) -> dict[str, IntRuns]:
        """Nonzero rows per instance over the whole witness, read from the main params."""
        found: dict[str, list[IntRuns]] = {n: [] for n in self.witnesses.instances()}
        covered: dict[str, int] = dict.fromkeys(found, 0)
        shards = self.shards()
        for index, opt in enumerate(self.members):
            local = [
                (s.instance, nonzero_rows(s.main.detach(), s.offset), s.main.numel())
                for s in shards
                if s.owner == index
            ]
            group = self._group(opt)
            parts: list[Any] = [local]
            if group is not None and dist.get_world_size(group) > 1:
                parts = [None] * dist.get_world_size(group)
                dist.all_gather_object(parts, local, group=group)
            for part in parts:
                for instance, runs, rows in part or ():
                    found[instance].append(runs)
                    covered[instance] += rows
        rows = self.witnesses.buffer_size
        short = {n: c for n, c in covered.items() if c != rows}
        if short:
            raise UnsupportedOptimizerError(
                f"the optimizer's main params cover {short} of the {rows} rows of these "
                "witnesses: build the optimizer after installing them"
            )
        return {n: union_runs(runs) for n, runs in found.items()}

    def zero(self, stale_ids: IntRuns | Sequence[int] | np.ndarray) -> None:
        """Zero ``stale_ids`` in the witness params, this rank's main shards and moments."""
        runs = as_runs(stale_ids)
        if not runs.starts:
            return
        for witness in self.witnesses.instances().values():
            zero_rows(witness.weight.data.view(-1), runs)
        for shard in self.shards():
            zero_rows(shard.main.data, runs, shard.offset)
            for key in shard.keys:
                value = shard.state.get(key)
                if isinstance(value, torch.Tensor) and value.numel() == shard.main.numel():
                    zero_rows(value.data.view(-1), runs, shard.offset)
