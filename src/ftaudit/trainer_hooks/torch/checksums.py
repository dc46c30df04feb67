"""Stable per-tensor hashes of a trainer's state, for cross-replica and restore checks.

A hash covers the dtype, the shape and the exact bytes of the values in logical
(row-major) order, so it does not depend on strides, storage offsets or the device, and
two tensors hash equal iff they are bitwise equal (``-0.0`` and ``0.0`` differ; bf16
works because the bytes are read through a ``uint8`` view, not through numpy's dtypes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from ftaudit.eventlog.events import WHOLE_TAG
from ftaudit.trainer_hooks.torch.dtensor import (
    digestible,
    global_sums,
    is_dtensor,
    row_shard,
    shard_name,
)

HASH_BYTES = 16
"""blake2b digest size: 128 bits, printed as 32 hex characters."""


def tensor_hash(tensor: torch.Tensor) -> str:
    """The hex digest of ``tensor``'s dtype, shape and values (bitwise)."""
    t = tensor.detach()
    h = hashlib.blake2b(digest_size=HASH_BYTES)
    h.update(f"{t.dtype}|{tuple(t.shape)}|".encode())
    if t.numel():
        data = t.contiguous().reshape(-1).view(torch.uint8).cpu()
        h.update(memoryview(data.numpy()))
    return h.hexdigest()


def value_hash(value: object) -> str:
    """A hash of a non-tensor state value (an int step, a flag) by its ``repr``."""
    if isinstance(value, torch.Tensor):
        return tensor_hash(value)
    return hashlib.blake2b(repr(value).encode(), digest_size=HASH_BYTES).hexdigest()


def object_hash(value: object) -> str:
    """A hash of a nested state value: dicts, sequences, tensors, arrays and scalars.

    Dict keys are visited in sorted order and arrays by their exact bytes, so equal
    states hash equal whatever their construction order, and no ``repr`` truncation
    hides a difference in a large array. A tuple and a list of the same values hash
    equal: a sequence's kind is not its value, and torch's ``get_state_dict`` /
    ``set_state_dict`` round trip turns Adam's ``betas`` tuple into a list (torch 2.13).
    """
    h = hashlib.blake2b(digest_size=HASH_BYTES)
    _feed(h, value)
    return h.hexdigest()


def _feed(h: Any, value: object) -> None:
    if isinstance(value, torch.Tensor):
        h.update(b"T" + tensor_hash(value).encode())
    elif isinstance(value, np.ndarray):
        h.update(f"A{value.dtype}|{value.shape}|".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, Mapping):
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
    else:  # scalars, strings, None: repr is exact for these
        h.update(f"{type(value).__name__}:{value!r}".encode())


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside DDP-style wrappers, so tensor names do not depend on the wrapper."""
    while isinstance(model, nn.parallel.DistributedDataParallel | nn.DataParallel):
        model = model.module
    return model


def state_hashes(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    master_params: Mapping[nn.Parameter, torch.Tensor] | None = None,
    whole: bool = False,
) -> dict[str, str]:
    """One hash per tensor: ``param/<name>``, ``buffer/<name>``, ``optim/<name>/<key>``.

    Witness parameters are included (they are parameters of the model). Optimizer state
    is named after the model parameter it belongs to; with ``master_params`` (model
    parameter -> fp32 master, the optimizer's key) the master copy is hashed as
    ``master/<name>`` and its state under the model parameter's name.

    A DTensor sharded by rows (FSDP2) is hashed as this rank's shard, under its name
    tagged with the rows (``param/w@rows[0:21]``). With ``whole`` (at save, load and
    heal) every tensor, sharded or not, also gets ``<name>@whole``: a digest of the whole
    tensor that does not depend on the layout, so a restore compares across a resharding
    and between FSDP and DDP (a collective over each sharded tensor's group: call it on
    every rank).
    """
    model = unwrap(model)
    hashes: dict[str, str] = {}
    tensors: dict[str, torch.Tensor] = {}

    def put(key: str, value: object) -> None:
        if is_dtensor(value):
            shard = row_shard(value)
            hashes[shard_name(key, shard)] = tensor_hash(shard.local)
        else:
            hashes[key] = value_hash(value)
        if whole and isinstance(value, torch.Tensor) and digestible(value):
            tensors[key] = value  # other dtypes (complex) keep their plain or shard hash

    names: dict[int, str] = {}
    for name, param in model.named_parameters():
        put(f"param/{name}", param)
        names[id(param)] = name
    for name, buffer in model.named_buffers():
        put(f"buffer/{name}", buffer)
    for param, master in (master_params or {}).items():
        name = names.get(id(param))
        if name is not None:
            put(f"master/{name}", master)
            names[id(master)] = name
    if optimizer is not None:
        for g, group in enumerate(optimizer.param_groups):
            for i, param in enumerate(group["params"]):
                name = names.get(id(param), f"group{g}.param{i}")
                for key, value in optimizer.state.get(param, {}).items():
                    put(f"optim/{name}/{key}", value)
    for key, sums in global_sums(tensors).items():
        hashes[key + WHOLE_TAG] = whole_digest(tensors[key], sums)
    return hashes


def whole_digest(tensor: torch.Tensor, sums: list[int]) -> str:
    """The digest of a whole sharded tensor: dtype, global shape and its summed lanes."""
    text = f"{tensor.dtype}|{tuple(tensor.shape)}|" + "|".join(str(s) for s in sums)
    return hashlib.blake2b(text.encode(), digest_size=HASH_BYTES).hexdigest()
