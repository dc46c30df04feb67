"""Hooks a training job calls: witness ids, driver decisions, fault injection (no torch here).

The torch side (the witness in the model, stale clearing, checksums, the worker facade)
lives in :mod:`ftaudit.trainer_hooks.torch`, so that a driver process never imports torch.
"""

from ftaudit.trainer_hooks.allocator import (
    KEEP_FRACTION,
    WitnessIdAllocator,
    WitnessInfo,
    keep_size,
    max_ids_per_step,
    min_buffer_size,
    witness_allocated_event,
)
from ftaudit.trainer_hooks.driver import (
    DriverSession,
    allocator_from_index,
    errored,
    ranks,
    should_retry,
)
from ftaudit.trainer_hooks.faults import FaultInjector, FaultSchedule, FaultSpec, fire
from ftaudit.trainer_hooks.stream import counter_positions, sampler_positions

__all__ = [
    "KEEP_FRACTION",
    "DriverSession",
    "FaultInjector",
    "FaultSchedule",
    "FaultSpec",
    "WitnessIdAllocator",
    "WitnessInfo",
    "allocator_from_index",
    "counter_positions",
    "errored",
    "fire",
    "keep_size",
    "max_ids_per_step",
    "min_buffer_size",
    "ranks",
    "sampler_positions",
    "should_retry",
    "witness_allocated_event",
]
