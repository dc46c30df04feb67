"""Hashes of the training state that lives outside the tensors: param-group scalars and
registered stateful objects (LR scheduler, grad scaler, sampler, data-loader state).

They go into the same checksum events as the weights, so the verifier compares them
across replicas, between a save and the loads of it, and between a heal's source and the
healed cell, exactly like a tensor. A scheduler that was not restored, a learning rate
changed on one replica, or a lost data-loader position then shows up by name
(``stateful/lr_scheduler``, ``group/0/lr``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import torch

from ftaudit.trainer_hooks.torch.checksums import HASH_BYTES, tensor_hash, value_hash


@runtime_checkable
class Stateful(Protocol):
    """Anything with ``state_dict()`` / ``load_state_dict()``: what torch calls stateful."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state: Any) -> Any: ...


def group_hashes(optimizer: torch.optim.Optimizer) -> dict[str, str]:
    """``group/<g>/<key>``: every hyperparameter of every param group (lr, betas, ...)."""
    # a sequence's kind is not its value: torch's get_state_dict/set_state_dict round
    # trip turns Adam's betas tuple into a list (seen with torch 2.13)
    return {
        f"group/{g}/{key}": value_hash(list(value) if isinstance(value, tuple) else value)
        for g, group in enumerate(optimizer.param_groups)
        for key, value in sorted(group.items())
        if key != "params"
    }


def stateful_hashes(stateful: Mapping[str, Stateful]) -> dict[str, str]:
    """``stateful/<name>``: one hash of each registered object's whole ``state_dict()``."""
    return {f"stateful/{name}": state_hash(obj.state_dict()) for name, obj in stateful.items()}


def state_hash(state: Any) -> str:
    """A hash of a nested state (dicts, lists, tensors, scalars) independent of dict order."""
    h = hashlib.blake2b(digest_size=HASH_BYTES)
    _feed(h, state)
    return h.hexdigest()


def _feed(h: Any, value: Any) -> None:
    if isinstance(value, Mapping):
        h.update(b"{")
        for key in sorted(value, key=repr):
            h.update(repr(key).encode() + b":")
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, list | tuple):
        h.update(b"[")
        for item in value:
            _feed(h, item)
            h.update(b",")
        h.update(b"]")
    elif isinstance(value, torch.Tensor):
        h.update(tensor_hash(value).encode())
    else:
        h.update(repr(value).encode())
