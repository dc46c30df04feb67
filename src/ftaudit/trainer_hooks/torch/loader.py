"""Stream positions of a ``DistributedSampler``: which dataset item each sample index is.

A run's sample index is a position in its data stream (SPEC §1). With a
``DistributedSampler`` of ``W`` replicas the stream is the sampler's epochs one after
another: epoch ``e`` holds ``L = sampler.total_size`` positions (the dataset, shuffled
by ``seed + e``, padded to a multiple of ``W``), starting at position ``e * L``. Rank
``r`` reads every ``W``-th position of it, so its ``j``-th local sample is position
``e * L + j * W + r``, and one step of local batch ``b`` on every rank is the contiguous
block of ``b * W`` positions after the previous step's.

:class:`SamplerStream` computes positions with
:func:`ftaudit.trainer_hooks.sampler_positions`, the items at them with the sampler's
own ``__iter__`` (never a re-implementation of its shuffle), declares them to the run
(``data_order``), and records the loader's state at checkpoints and resumes
(``loader_state``), so rule FT008 can tell a resumed stream that kept its epoch and seed
from one that did not. It works the same under a ``torchdata`` ``StatefulDataLoader``,
whose own state it records too.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import torch
from torch.utils.data import RandomSampler

from ftaudit.errors import UsageError
from ftaudit.eventlog.events import DataOrder, LoaderState, LoaderWhen
from ftaudit.trainer_hooks.stream import counter_positions, sampler_positions


class ReplicaSampler(Protocol):
    """What a ``torch.utils.data.DistributedSampler`` offers (the protocol this needs)."""

    num_replicas: int
    rank: int
    epoch: int
    seed: int
    shuffle: bool
    total_size: int

    def __iter__(self) -> Any: ...

    def __len__(self) -> int: ...


class SamplerStream:
    """The stream positions of one rank's ``DistributedSampler`` batches of ``batch_size``."""

    def __init__(self, sampler: ReplicaSampler, *, batch_size: int) -> None:
        if batch_size <= 0:
            raise UsageError("batch_size must be positive")
        self.sampler = sampler
        self.batch_size = batch_size

    @property
    def replicas(self) -> int:
        return int(self.sampler.num_replicas)

    @property
    def epoch_length(self) -> int:
        """Positions per epoch: the padded (or cut) dataset, over all replicas."""
        return int(self.sampler.total_size)

    @property
    def batches_per_epoch(self) -> int:
        """Full local batches per epoch (a last, partial batch is never trained)."""
        return len(self.sampler) // self.batch_size

    @property
    def global_batch(self) -> int:
        return self.batch_size * self.replicas

    def step_positions(self, epoch: int, batch: int) -> np.ndarray:
        """The sample indices of local batch ``batch`` of ``epoch`` on every rank."""
        first = epoch * self.epoch_length + batch * self.global_batch
        return counter_positions(first, self.global_batch)

    def batch_positions(self, epoch: int, batch: int, rank: int | None = None) -> np.ndarray:
        """The sample indices of one rank's local batch ``batch`` (this rank's by default)."""
        local = batch * self.batch_size + np.arange(self.batch_size, dtype=np.int64)
        return sampler_positions(
            epoch=epoch,
            rank=self.sampler.rank if rank is None else rank,
            num_replicas=self.replicas,
            local_offsets=local,
            epoch_size=self.epoch_length,
        )

    def locate(self, step: int) -> tuple[int, int]:
        """(epoch, local batch) of a run's ``step``, counting full batches from step 0."""
        return divmod(step, self.batches_per_epoch)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """Item of every position of ``epoch``, from the sampler's own iteration per rank."""
        order = np.empty(self.epoch_length, dtype=np.int64)
        for r in range(self.replicas):
            twin = copy.copy(self.sampler)
            twin.rank = r
            twin.epoch = epoch
            order[r :: self.replicas] = np.fromiter(iter(twin), dtype=np.int64)
        return order

    def rank_major_order(self, epoch: int) -> np.ndarray:
        """:meth:`epoch_order` laid out the way a framework callback numbers its samples.

        A callback's stream counts each step's micro-batches of all ranks together, rank
        0's first (:class:`ftaudit.trainer_hooks.torch.step_recorder.StepRecorder`), so
        position ``k * b * W + r * b + i`` reads rank ``r``'s local item ``k * b + i``.
        Only full local batches are kept (a last, partial one is never trained).
        """
        b, w, batches = self.batch_size, self.replicas, self.batches_per_epoch
        order = self.epoch_order(epoch)[: batches * b * w]
        return order.reshape(batches, b, w).transpose(0, 2, 1).reshape(-1)

    def data_order(self, epoch: int) -> DataOrder:
        """The ``data_order`` event of ``epoch`` (log it once per epoch, from any rank)."""
        dataset = getattr(self.sampler, "dataset", None)
        return DataOrder(
            epoch=epoch,
            start=epoch * self.epoch_length,
            items=self.epoch_order(epoch).tolist(),
            dataset_size=len(dataset) if dataset is not None else self.epoch_length,
            seed=int(self.sampler.seed),
            shuffle=bool(self.sampler.shuffle),
            sampler=type(self.sampler).__name__,
        )

    def loader_state(
        self,
        *,
        iteration: int,
        when: LoaderWhen | str,
        next_step: int,
        loader_state: Mapping[str, Any] | None = None,
    ) -> LoaderState:
        """The ``loader_state`` event: the sampler's epoch and seed as they are NOW.

        Log it with ``when="saved"`` right after checkpoint ``iteration`` was written
        (``next_step`` = iteration + 1) and with ``when="resumed"`` after a resumed job
        restored its loader from it, before the first batch: FT008 compares the two.
        ``loader_state`` is e.g. a ``StatefulDataLoader.state_dict()``, kept as JSON.
        """
        epoch, batch = self.locate(next_step)
        return LoaderState(
            iteration=iteration,
            when=LoaderWhen(when),
            position=int(self.step_positions(epoch, batch)[0]),
            epoch=int(self.sampler.epoch),
            seed=int(self.sampler.seed),
            state_json=json.dumps(dict(loader_state or {}), sort_keys=True, default=str),
        )


def base_sampler(loader: Any) -> Any:
    """The sampler under the loader's batch samplers (accelerate's shard wraps one), or
    the loader's own ``sampler`` (a custom loader), or None."""
    batches = getattr(loader, "batch_sampler", None)
    while hasattr(batches, "batch_sampler"):
        batches = batches.batch_sampler
    return getattr(batches, "sampler", None) or getattr(loader, "sampler", None)


def epoch_order(sampler: Any, epoch: int) -> list[int] | None:
    """The items ``sampler`` yields in ``epoch``, from its own ``__iter__`` on a copy.

    The copy is set to ``epoch`` (a sampler with ``set_epoch`` seeds its shuffle by it,
    such as accelerate's ``SeedableRandomSampler`` the HF Trainer uses) and gets a clone
    of the sampler's generator, so the real sampler and generator do not move. A random
    sampler without a generator nor ``set_epoch`` draws its seed from the global RNG when
    iterated: its order cannot be read ahead without changing it (None).
    """
    if sampler is None:
        return None
    generator = getattr(sampler, "generator", None)
    per_epoch = hasattr(sampler, "set_epoch")
    if generator is None and isinstance(sampler, RandomSampler) and not per_epoch:
        return None
    twin = copy.copy(sampler)
    if per_epoch:
        twin.set_epoch(epoch)
    if generator is not None:
        twin.generator = torch.Generator(device=generator.device)
        twin.generator.set_state(generator.get_state())
    return [int(i) for i in twin]
