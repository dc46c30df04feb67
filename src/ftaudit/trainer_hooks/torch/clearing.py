"""After a committed step: snapshot the nonzero witness rows, then zero the stale ones.

The order matters: the snapshot is the evidence of the step, and zeroing first would
erase the evidence of the slots being recycled. Zeroing must reach every copy of a row
that can make it nonzero again: the parameter, an fp32 master copy, and the optimizer
moments (Adam's ``exp_avg``/``exp_avg_sq``, SGD momentum). An optimizer whose state this
module does not know is refused, never silently left uncleared.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist

from ftaudit.errors import (
    UnsupportedOptimizerError,
    UsageError,
)
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.trainer_hooks.torch.dtensor import check_row_sharded, is_dtensor, row_shard
from ftaudit.trainer_hooks.torch.witness import WitnessSet

ROW_STATE_KEYS: dict[type[torch.optim.Optimizer], tuple[str, ...]] = {
    torch.optim.Adam: ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    torch.optim.AdamW: ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"),
    torch.optim.SGD: ("momentum_buffer",),
}
"""Per optimizer class, the state tensors shaped like the parameter (row-wise state)."""

MasterParams = Mapping[torch.nn.Parameter, torch.Tensor]
"""Model witness parameter -> its fp32 master copy (the optimizer's parameter, if any)."""


def row_state_keys(optimizer: torch.optim.Optimizer) -> tuple[str, ...]:
    """The row-wise state keys of ``optimizer``; refuses an optimizer it cannot clear."""
    for cls in type(optimizer).__mro__:
        keys = ROW_STATE_KEYS.get(cls)  # type: ignore[call-overload]
        if keys is not None:
            return keys
    supported = ", ".join(sorted(c.__name__ for c in ROW_STATE_KEYS))
    raise UnsupportedOptimizerError(
        f"{type(optimizer).__name__} is not supported by the witness clearing: its state "
        f"could make cleared witness rows nonzero again. Use one of {supported}, or give "
        "the witness parameters their own supported optimizer"
    )


def as_runs(ids: IntRuns | Sequence[int] | np.ndarray) -> IntRuns:
    """Witness ids as a canonical set of runs."""
    if isinstance(ids, IntRuns):
        return IntRuns.from_ids(ids.to_array())
    return IntRuns.from_ids(np.asarray(ids, dtype=np.int64).reshape(-1))


def nonzero_rows(weight: torch.Tensor, offset: int = 0) -> IntRuns:
    """The rows of a [B, 1] witness weight that hold a nonzero value, as runs.

    Run boundaries are found on the weight's device, so only O(runs) values cross to
    the host, not O(B) row numbers. ``offset`` is the global row of ``weight``'s first
    row, for a shard of the rows (a distributed optimizer's main-param shard).
    """
    rows = weight.shape[0]
    flat = weight.detach().reshape(rows, -1)
    mask = flat.reshape(-1).ne(0) if flat.shape[1] == 1 else flat.ne(0).any(dim=1)
    edges = torch.zeros(rows + 2, dtype=torch.int8, device=mask.device)
    edges[1:-1] = mask
    step = edges.diff()
    starts = torch.nonzero(step == 1).reshape(-1)
    ends = torch.nonzero(step == -1).reshape(-1)
    if starts.numel() == 0:
        return IntRuns()
    return IntRuns(starts=(starts + offset).tolist(), lengths=(ends - starts).tolist())


def union_runs(parts: Iterable[IntRuns]) -> IntRuns:
    """The union of sets of runs, merged run by run (O(runs), not O(ids))."""
    spans = sorted((s, s + n) for p in parts for s, n in zip(p.starts, p.lengths, strict=True))
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return IntRuns(starts=[s for s, _ in merged], lengths=[e - s for s, e in merged])


def nonzero_rows_of(weight: torch.Tensor) -> IntRuns:
    """The nonzero rows of a whole witness, plain or a DTensor sharded by rows.

    A DTensor's rank reads its local rows at their global offset, and the ranks its rows
    are split over exchange their runs (O(runs) objects), so every rank reports the whole
    witness; a collective over that group.
    """
    shard = row_shard(weight)
    local = nonzero_rows(shard.local, shard.offset)
    if shard.group is None or dist.get_world_size(shard.group) == 1:
        return local
    parts: list[IntRuns] = [IntRuns()] * dist.get_world_size(shard.group)
    dist.all_gather_object(parts, local, group=shard.group)
    return union_runs(parts)


class WitnessClearer:
    """Snapshots and clears the rows of one model's witnesses, with their optimizer state."""

    def __init__(
        self,
        witnesses: WitnessSet,
        optimizer: torch.optim.Optimizer,
        master_params: MasterParams | None = None,
    ) -> None:
        self.witnesses = witnesses
        self.optimizer = optimizer
        self.state_keys = row_state_keys(optimizer)
        self.master = dict(master_params or {})
        for name, witness in witnesses.instances().items():
            check_row_sharded(f"witness {name}", witness.weight)  # refused here, not mid-step
        optimized = {id(p) for group in optimizer.param_groups for p in group["params"]}
        for name, witness in witnesses.instances().items():
            key = self.master.get(witness.weight, witness.weight)
            if id(key) not in optimized:
                raise UsageError(
                    f"witness {name} is not in the optimizer: install the witnesses before "
                    "building the optimizer (or add their parameters to it)"
                )

    def _source(self, param: torch.nn.Parameter) -> torch.Tensor:
        return self.master.get(param, param)

    def snapshot(self) -> dict[str, IntRuns]:
        """Nonzero rows per instance, read from the fp32 master copy where there is one."""
        return {
            name: nonzero_rows_of(self._source(witness.weight))
            for name, witness in self.witnesses.instances().items()
        }

    def zero(self, stale_ids: IntRuns | Sequence[int] | np.ndarray) -> None:
        """Zero ``stale_ids`` in every witness parameter, master copy and optimizer moment."""
        runs = as_runs(stale_ids)
        if not runs.starts:
            return
        with torch.no_grad():
            for witness in self.witnesses.instances().values():
                for tensor in self._row_tensors(witness.weight):
                    if is_dtensor(tensor):  # this rank's rows of it, in place
                        shard = row_shard(tensor)
                        zero_rows(shard.local, runs, shard.offset)
                    else:
                        _zero_runs(tensor, runs)

    def _row_tensors(self, param: torch.nn.Parameter) -> Iterable[torch.Tensor]:
        yield param
        master = self.master.get(param)
        if master is not None:
            yield master
        for key_param in (param, master):
            if key_param is None:
                continue
            state = self.optimizer.state.get(key_param, {})
            for key in self.state_keys:
                value = state.get(key)
                if isinstance(value, torch.Tensor) and value.shape == key_param.shape:
                    yield value


def zero_rows(tensor: torch.Tensor, runs: IntRuns, offset: int = 0) -> None:
    """Zero the global rows ``runs`` that fall in a shard holding rows ``offset ...``.

    ``tensor``'s first dimension is rows ``offset .. offset + len(tensor) - 1`` of the
    witness; rows outside the shard are someone else's and left alone.
    """
    rows = tensor.shape[0]
    with torch.no_grad():
        for start, length in zip(runs.starts, runs.lengths, strict=True):
            lo, hi = max(start - offset, 0), min(start + length - offset, rows)
            if lo < hi:
                tensor[lo:hi].zero_()


def _zero_runs(tensor: torch.Tensor, runs: IntRuns) -> None:
    rows = tensor.shape[0]
    for start, length in zip(runs.starts, runs.lengths, strict=True):
        if start < 0 or start + length > rows:
            raise UsageError(f"witness ids {start}..{start + length - 1} outside 0..{rows - 1}")
        tensor[start : start + length].zero_()
