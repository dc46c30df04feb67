"""Application counting: how many times each committed step reached the weights.

The witness rows say WHICH samples reached the weights, not how often. Two pieces of
evidence count applications:

- the witness gradient after the all-reduce, before the optimizer step: it must hold
  exactly the attempt's own ids (a row of an earlier attempt is a gradient that was
  never cleared, about to be applied a second time);
- step counters after the step: the optimizer's own step count (Adam's ``step``) and
  every registered scheduler's ``last_epoch``. Each must grow by exactly one per
  committed step (an optimizer stepped twice, a replayed step, or a schedule that
  restarted all break the count).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.trainer_hooks.torch.clearing import nonzero_rows_of
from ftaudit.trainer_hooks.torch.witness import WitnessSet

OPTIMIZER_COUNTER = "optimizer"
"""The counter name of the optimizer's own step count."""


def gradient_rows(witnesses: WitnessSet) -> dict[str, IntRuns]:
    """Per witness instance, the rows of its gradient that are nonzero (none: no gradient).

    A gradient sharded by rows (FSDP2: a DTensor like its parameter) is read as the whole
    witness, a collective over its shard group like the snapshot: every rank calls it.
    """
    return {
        name: IntRuns() if w.weight.grad is None else nonzero_rows_of(w.weight.grad)
        for name, w in witnesses.instances().items()
    }


def optimizer_steps(optimizer: object) -> int | None:
    """The optimizer's step count: the largest per-parameter ``step`` (None: it keeps none).

    Adam, AdamW, Adagrad, RMSprop and most modern optimizers count steps per parameter;
    plain SGD does not, and then only the schedulers are counted. Wrappers whose
    ``state`` is not a plain dict (a chained optimizer's proxy) are read through
    ``items()``.
    """
    state = getattr(optimizer, "state", None)
    items = getattr(state, "items", None)
    if items is None:
        return None
    steps = [
        int(value.item() if isinstance(value, torch.Tensor) else value)
        for _, per_param in items()
        if isinstance(per_param, Mapping) and (value := per_param.get("step")) is not None
    ]
    return max(steps) if steps else None


def step_counters(optimizer: object, stateful: Mapping[str, object]) -> dict[str, int]:
    """The optimizer's step count and each registered object's ``last_epoch`` (schedulers)."""
    counters: dict[str, int] = {}
    steps = optimizer_steps(optimizer)
    if steps is not None:
        counters[OPTIMIZER_COUNTER] = steps
    for name, obj in stateful.items():
        epoch = getattr(obj, "last_epoch", None)
        if isinstance(epoch, int) and not isinstance(epoch, bool):
            counters[name] = epoch
    return counters
