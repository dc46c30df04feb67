"""Hashes of the state outside the weights that a resume must restore: RNG, scheduler, data.

A resumed run trains the same samples the same way only if, besides the model and the
optimizer, the learning-rate scheduler, the random number generators and the data
position come back as they were saved. Each is hashed here into the same
``name -> hash`` map as the tensors (``rng/torch``, ``sched/last_epoch``,
``data/global_step``), so rule FT006 compares them at save and at load like any tensor.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ftaudit.trainer_hooks.torch.checksums import object_hash


def rng_states() -> dict[str, Any]:
    """This process's random number generator states (python, numpy, torch, each CUDA device)."""
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for i, state in enumerate(torch.cuda.get_rng_state_all()):
            states[f"cuda{i}"] = state
    return states


def set_rng_states(states: Mapping[str, Any]) -> None:
    """Restore what :func:`rng_states` returned (devices absent now are skipped)."""
    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    torch.random.set_rng_state(states["torch"])
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            if f"cuda{i}" in states:
                torch.cuda.set_rng_state(states[f"cuda{i}"], i)


def portable_rng_states() -> dict[str, Any]:
    """:func:`rng_states` as tensors, ints and lists only, so that a checkpoint holding
    them loads with ``torch.load(weights_only=True)`` (numpy's state is an array)."""
    states = rng_states()
    name, keys, pos, has_gauss, gauss = states["numpy"]
    version, internal, python_gauss = states["python"]
    states["numpy"] = [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss]
    states["python"] = [version, list(internal), python_gauss]
    return states


def restore_portable_rng_states(states: Mapping[str, Any]) -> None:
    """Restore what :func:`portable_rng_states` returned."""
    name, keys, pos, has_gauss, gauss = states["numpy"]
    version, internal, python_gauss = states["python"]
    set_rng_states(
        {
            **states,
            "numpy": (name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss),
            "python": (version, tuple(internal), python_gauss),
        }
    )


def prefixed_hashes(prefix: str, state: Mapping[str, Any]) -> dict[str, str]:
    """One hash per top-level entry of ``state``, named ``<prefix>/<key>``."""
    return {f"{prefix}/{key}": object_hash(value) for key, value in state.items()}


def rng_hashes(states: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``rng/<generator>`` hashes of ``states`` (default: the current ones)."""
    return prefixed_hashes("rng", rng_states() if states is None else states)


def restored_state_hashes(
    schedulers: Mapping[str, Any], data: Mapping[str, object]
) -> dict[str, str]:
    """What a resume restores besides model and optimizer, as hashes: the RNG states
    (``rng/...``), each scheduler's state (``<name>/<key>``) and the framework's data
    position (``data/<key>``)."""
    hashes = rng_hashes()
    for name, scheduler in schedulers.items():
        hashes.update(prefixed_hashes(name, scheduler.state_dict()))
    hashes.update(prefixed_hashes("data", data))
    return hashes
