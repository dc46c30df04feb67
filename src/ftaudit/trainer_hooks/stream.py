"""Sample indices as positions in the run's data stream (SPEC §1, "sample index").

The verifier (FT005) checks that the committed sample indices form one contiguous range
from 0 and that none repeats. That holds for a correct run only if a sample index is the
sample's position in the stream the loader reads (a consumed-samples counter), not the
dataset index the position happens to read: a shuffled sampler reads dataset indices in
any order, but its stream positions are still 0, 1, 2, ...

Pure arithmetic, no torch: the loaders' own objects are read by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ftaudit.errors import UsageError


def sampler_positions(
    *,
    epoch: int,
    rank: int,
    num_replicas: int,
    local_offsets: Sequence[int] | np.ndarray,
    epoch_size: int,
) -> np.ndarray:
    """Stream positions of samples a ``torch.utils.data.DistributedSampler`` gave one rank.

    ``DistributedSampler`` orders one epoch's items (shuffled by ``seed + epoch`` when
    ``shuffle=True``, padded to ``total_size``) and hands rank ``r`` of ``W`` the items at
    positions ``r, r + W, r + 2W, ...`` of that order. The ``k``-th item a rank yields in
    an epoch (``local_offsets`` holds these ``k``) therefore sits at position
    ``epoch * total_size + k * W + r`` of the stream. With ``b`` samples per rank per
    step, step ``s`` of an epoch covers positions ``[s * b * W, (s + 1) * b * W)`` across
    the ranks: contiguous, whatever the shuffle.

    ``epoch_size`` is the sampler's ``total_size`` (``num_samples * num_replicas``).
    """
    if not 0 <= rank < num_replicas:
        raise UsageError(f"rank {rank} is not in [0, num_replicas={num_replicas})")
    offsets = np.asarray(local_offsets, dtype=np.int64)
    if offsets.size and (offsets.min() < 0 or offsets.max() * num_replicas + rank >= epoch_size):
        raise UsageError(f"local offsets must address positions inside an epoch of {epoch_size}")
    return epoch * epoch_size + offsets * num_replicas + rank


def counter_positions(consumed_before: int, count: int) -> np.ndarray:
    """Stream positions of a global batch of ``count`` samples read after ``consumed_before``.

    For a loader that counts consumed samples (Megatron's ``consumed_samples``, a
    ``StatefulDataLoader`` whose state is saved with the checkpoint): the counter at the
    start of the step, restored at a resume, is the first position of the step's batch.
    """
    if consumed_before < 0 or count < 0:
        raise UsageError("consumed_before and count must be non-negative")
    return np.arange(consumed_before, consumed_before + count, dtype=np.int64)
