"""Hashes of the training state that lives outside the tensors: param-group scalars and
registered stateful objects (LR scheduler, grad scaler, sampler, data-loader state).

They go into the same checksum events as the weights, so the verifier compares them
across replicas, between a save and the loads of it, and between a heal's source and the
healed cell, exactly like a tensor. A scheduler that was not restored, a learning rate
changed on one replica, or a lost data-loader position then shows up by name
(``stateful/lr_scheduler``, ``group/0/lr``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch

from ftaudit.trainer_hooks.torch.checksums import object_hash


@runtime_checkable
class Stateful(Protocol):
    """Anything with ``state_dict()`` / ``load_state_dict()``: what torch calls stateful."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> Any: ...


def group_hashes(optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """``group/<g>/<key>``: every hyperparameter of every param group (lr, betas, ...)."""
    return {
        f"group/{g}/{key}": object_hash(value)
        for g, group in enumerate(optimizer.param_groups)
        for key, value in sorted(group.items())
        if key != "params"
    }


def stateful_hashes(stateful: Mapping[str, Stateful]) -> dict[str, str]:
    """``stateful/<name>``: one hash of each registered object's whole ``state_dict()``."""
    return {f"stateful/{name}": object_hash(obj.state_dict()) for name, obj in stateful.items()}
