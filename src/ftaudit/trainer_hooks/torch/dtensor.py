"""DTensor (FSDP2 ``fully_shard``) support: local shards, their global rows, global digests.

FSDP2 shards every parameter, and the optimizer state with it, along dim 0: a rank
holds rows ``offset .. offset + len(local) - 1`` of the witness ``[B, 1]``, so witness
rows are read and zeroed in the local shard at that offset. Only placements that keep
whole rows on one rank are supported (``Shard(0)`` and ``Replicate()``, as FSDP and HSDP
use them); anything else is refused when the hooks attach, never mid-step.

A checksum of a local shard depends on the layout (world size, mesh shape). For a
restore across a resharding, :func:`global_sums` gives each tensor a digest of the whole
tensor that does not depend on how it is split, or whether it is split at all (a plain
tensor of a DDP replica digests like the same tensor sharded by FSDP): the wrapping sum
(mod 2^64, in two independent lanes) of a 64-bit mix of every element's global position
and bits. Each rank sums its own elements; one all-reduce over the group the rows are
split over adds the ranks' sums. Nothing is gathered, and the sum is the same for any
split.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ftaudit.errors import UnsupportedShardingError
from ftaudit.eventlog.events import SHARD_TAG

_CHUNK = 1 << 16  # elements mixed at a time: int64 temporaries that stay in cache
_SEEDS = (0x5851F42D4C957F2D, 0x14057B7EF767814F)
_M1, _M2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's finaliser
_K_POS = 0x9E3779B97F4A7C15


def is_dtensor(tensor: object) -> bool:
    """Whether ``tensor`` is a DTensor, without importing ``torch.distributed.tensor``.

    That import costs over a second of CPU in every process that loads the hooks (each
    Ray worker of a job); a program that never imported it holds no DTensor.
    """
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


@dataclass(frozen=True)
class RowShard:
    """The rows of a DTensor that this rank holds: ``local`` is rows ``offset ...``."""

    local: torch.Tensor
    offset: int
    group: dist.ProcessGroup | None
    """The ranks the rows are split over (None: this rank holds every row)."""


def check_row_sharded(name: str, tensor: torch.Tensor) -> None:
    """Refuse a DTensor whose local shard is not whole rows (raised at attach time)."""
    if not is_dtensor(tensor):
        return
    bad = [p for p in tensor.placements if not _whole_rows(p)]
    if bad:
        raise UnsupportedShardingError(
            f"{name} is a DTensor placed as {tuple(tensor.placements)}: ftaudit supports "
            "only Shard(0) and Replicate() placements (FSDP2 and HSDP with fully_shard), "
            "where each rank holds whole rows"
        )


def _whole_rows(placement: object) -> bool:
    from torch.distributed.tensor import Replicate, Shard  # loaded: a DTensor exists

    return isinstance(placement, Replicate) or (type(placement) is Shard and placement.dim == 0)


def row_shard(tensor: torch.Tensor) -> RowShard:
    """This rank's rows of ``tensor`` (a plain tensor: all of them, offset 0)."""
    if not is_dtensor(tensor):
        return RowShard(tensor, 0, None)
    from torch.distributed.tensor import Shard  # loaded: a DTensor exists

    check_row_sharded("tensor", tensor)
    (chunk,) = tensor.__create_chunk_list__()  # the local block's offsets, as DCP reads them
    sharded = [i for i, p in enumerate(tensor.placements) if isinstance(p, Shard)]
    if len(sharded) > 1:
        raise UnsupportedShardingError(
            f"rows sharded over {len(sharded)} mesh dimensions: only one is supported"
        )
    group = tensor.device_mesh.get_group(sharded[0]) if sharded else None
    return RowShard(tensor.to_local(), int(chunk.offsets[0]) if chunk.offsets else 0, group)


def shard_name(name: str, shard: RowShard) -> str:
    """``name`` tagged with the rows it covers, for a local shard's hash."""
    rows = shard.local.shape[0] if shard.local.dim() else 1
    return f"{name}{SHARD_TAG}[{shard.offset}:{shard.offset + rows}]"


def global_sums(tensors: Mapping[str, torch.Tensor]) -> dict[str, list[int]]:
    """Per whole tensor (a DTensor, or a plain tensor held whole), its summed lanes (see
    :func:`lane_sums`), the same for any layout; a collective over each DTensor's shard
    group.

    Every rank of the group must call it with the same names, in the same order.
    """
    lanes: dict[dist.ProcessGroup | None, list[tuple[str, torch.Tensor]]] = {}
    for name, tensor in tensors.items():
        shard = row_shard(tensor)
        width = math.prod(tensor.shape[1:])
        lanes.setdefault(shard.group, []).append(
            (name, lane_sums(shard.local, shard.offset * width))
        )
    out: dict[str, list[int]] = {}
    for group, items in lanes.items():
        stacked = torch.stack([sums for _, sums in items])
        if group is not None:
            dist.all_reduce(stacked, op=dist.ReduceOp.SUM, group=group)  # wraps mod 2^64
        out.update(zip((n for n, _ in items), stacked.cpu().tolist(), strict=True))
    return out


def lane_sums(local: torch.Tensor, first: int) -> torch.Tensor:
    """Two int64 lanes: the wrapping sums of ``mix(position, bits)`` over ``local``'s
    elements, whose global flat positions start at ``first`` (row-major)."""
    flat = local.detach().contiguous().reshape(-1)
    bits = _bits(flat)
    out = torch.zeros(len(_SEEDS), dtype=torch.int64, device=flat.device)
    for start in range(0, bits.numel(), _CHUNK):
        part = bits[start : start + _CHUNK]
        lo = first + start
        base = torch.arange(lo, lo + part.numel(), dtype=torch.int64, device=part.device)
        base.mul_(_i64(_K_POS)).add_(part * _i64(_M2))  # position and bits, once per chunk
        for lane, seed in enumerate(_SEEDS):
            out[lane] += _mix_(base + _i64(seed)).sum()
    return out


_VIEWS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
"""Element size -> the integer dtype its bits are read through."""


def digestible(tensor: torch.Tensor) -> bool:
    """Whether :func:`lane_sums` can digest ``tensor``'s dtype (not complex, at most 64 bits)."""
    return tensor.element_size() in _VIEWS and not tensor.is_complex()


def _bits(flat: torch.Tensor) -> torch.Tensor:
    """The raw bits of each element as an int64 (so ``-0.0`` and ``0.0`` differ)."""
    if not digestible(flat):
        raise UnsupportedShardingError(f"cannot digest a sharded tensor of dtype {flat.dtype}")
    return flat.view(_VIEWS[flat.element_size()]).to(torch.int64)


def _i64(value: int) -> int:
    """An unsigned 64-bit constant as the signed int64 with the same bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _mix_(z: torch.Tensor) -> torch.Tensor:
    """splitmix64's finaliser on int64, in place (logical shifts emulated on the signed
    type); in place because the digest runs over every tensor at a save or load."""
    for shift, multiplier in ((30, _i64(_M1)), (27, _i64(_M2)), (31, None)):
        shifted = z >> shift
        shifted.bitwise_and_((1 << (64 - shift)) - 1)
        z.bitwise_xor_(shifted)
        if multiplier is not None:
            z.mul_(multiplier)
    return z
