"""Per-tensor hashes of a Megatron rank: parameters (witnesses included), main params, moments."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from ftaudit.trainer_hooks.megatron.clearing import main_param_pairs, optimizer_members
from ftaudit.trainer_hooks.torch.checksums import tensor_hash, value_hash


def _unwrap(chunk: nn.Module) -> nn.Module:
    """The GPTModel inside Megatron's DDP and Float16Module wrappers."""
    while not hasattr(chunk, "decoder") and isinstance(getattr(chunk, "module", None), nn.Module):
        chunk = chunk.module
    return chunk


def megatron_state_hashes(model: nn.Module | Sequence[nn.Module], optimizer: Any) -> dict[str, str]:
    """``param/chunk{i}.<name>``, ``buffer/...``, ``master/...`` and ``optim/.../<key>``.

    Names do not depend on the DDP and Float16Module wrappers. ``master`` and ``optim``
    hash this rank's shard (with the distributed optimizer, each data-parallel rank holds
    its own shard, so compare the same rank across cells, as FT006 does).
    """
    chunks = [model] if isinstance(model, nn.Module) else list(model)
    hashes: dict[str, str] = {}
    names: dict[int, str] = {}
    for i, chunk in enumerate(chunks):
        inner = _unwrap(chunk)
        for name, param in inner.named_parameters():
            hashes[f"param/chunk{i}.{name}"] = tensor_hash(param)
            names[id(param)] = f"chunk{i}.{name}"
        for name, buffer in inner.named_buffers():
            hashes[f"buffer/chunk{i}.{name}"] = tensor_hash(buffer)
    for opt in optimizer_members(optimizer):
        if getattr(opt, "is_stub_optimizer", False):
            continue
        for param, main, _ in main_param_pairs(opt):
            name = names.get(id(param))
            if name is None or main is None:
                continue
            if main is not param:
                hashes[f"master/{name}"] = tensor_hash(main)
            for key, value in opt.optimizer.state.get(main, {}).items():
                hashes[f"optim/{name}/{key}"] = value_hash(value)
    return hashes
