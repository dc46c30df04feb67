"""The trainable-parameter manifest of one trainer rank.

The witness proves that gradient reached the witness rows, not that every parameter
was trained: a head frozen after a resume still lets gradient through to the witness.
The manifest (name, shape, dtype, ``requires_grad``, optimizer param group of every
parameter) pins down what is trained; the verifier compares it across incarnations,
cells and heals (FT012).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

from ftaudit.trainer_hooks.torch.checksums import unwrap


@dataclass(frozen=True)
class Manifest:
    """Parallel lists, one entry per parameter in ``named_parameters`` order."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    requires_grad: tuple[bool, ...]
    groups: tuple[int, ...]

    @property
    def digest(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        h.update(repr(self).encode())
        return h.hexdigest()


def parameter_manifest(model: nn.Module, optimizer: torch.optim.Optimizer | None) -> Manifest:
    """What ``model`` trains: every parameter with its flag and param group (-1: none)."""
    group_of: dict[int, int] = {}
    if optimizer is not None:
        # a wrapper whose groups hold fp32 copies (Megatron) maps nothing here: -1 each,
        # the same in every incarnation, so a manifest still compares
        for g, group in enumerate(getattr(optimizer, "param_groups", ())):
            for p in group["params"]:
                group_of[id(p)] = g
    params = list(unwrap(model).named_parameters())
    return Manifest(
        names=tuple(n for n, _ in params),
        shapes=tuple(tuple(p.shape) for _, p in params),
        dtypes=tuple(str(p.dtype).removeprefix("torch.") for _, p in params),
        requires_grad=tuple(p.requires_grad for _, p in params),
        groups=tuple(group_of.get(id(p), -1) for _, p in params),
    )
