"""How a global batch is split among the cells of a quorum: whole GRPO groups, in order."""

from __future__ import annotations


def shard_slice(num_samples: int, group_size: int, rank: int, world_size: int) -> slice:
    """The samples of ``rank``: a contiguous block of whole groups (earlier ranks get extras).

    Groups are never split, because GRPO normalises advantages within a group.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside a quorum of {world_size}")
    if num_samples % group_size:
        raise ValueError(f"{num_samples} samples do not form whole groups of {group_size}")
    groups = num_samples // group_size
    base, extra = divmod(groups, world_size)
    start = rank * base + min(rank, extra)
    count = base + (1 if rank < extra else 0)
    return slice(start * group_size, (start + count) * group_size)
