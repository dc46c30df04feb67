"""What every engine adapter gives: one map ``tensor name -> hash`` per engine (no torch).

Names carry the full parallel coordinates of the GPU that holds the tensor, so the
shards of a parallel engine stay apart and line up with the same GPU of another engine:
``dp0.pp0.tp1/model.layers.0.mlp.up_proj.weight`` (SGLang), ``tp1/<name>`` (an
in-process engine, tensor-parallel only). Every coordinate the engine reports is kept,
including those of groups of one, so a name never depends on what is left out.

Hashes are the engines' own (SGLang's 64-bit tensor hash, vLLM's sha256, ftaudit's
blake2b for in-process engines) and are compared as opaque strings: only engines of one
kind are compared with each other, tensor by tensor, by FT007.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from ftaudit.errors import ChecksumUnsupportedError, EngineChecksumError, FtauditError, UsageError  # noqa: F401 (documented here)

ERROR_TENSOR = "!error"
"""The tensor name under which a recorder logs an engine it could not read (see
:class:`ftaudit.trainer_hooks.engines.EngineChecksumRecorder`)."""


@runtime_checkable
class WeightChecksumSource(Protocol):
    """Anything that can report the weight hashes of one inference engine."""

    kind: str
    """``sglang``, ``vllm``, ``torch``: engines of different kinds hash differently."""

    def describe(self) -> str:
        """A short name for messages, e.g. ``sglang http://10.0.0.3:30000``."""
        ...

    def checksums(self) -> dict[str, str]:
        """Tensor name (with its rank label) -> hash; raises :class:`EngineChecksumError`."""
        ...


_AXIS = re.compile(r"^[a-z]+$")


def rank_label(*coordinates: tuple[str, int]) -> str:
    """``dp0.pp1.tp0`` from ``("dp", 0), ("pp", 1), ("tp", 0)``: every coordinate, in order."""
    if not coordinates:
        raise UsageError("a rank label needs at least one coordinate")
    parts = []
    for axis, rank in coordinates:
        if not _AXIS.match(axis):
            raise UsageError(f"parallel axis {axis!r} is not a lowercase word")
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise UsageError(f"{axis} rank {rank!r} is not a non-negative int")
        parts.append(f"{axis}{rank}")
    return ".".join(parts)


def merge_ranks(engine: str, per_rank: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, str]:
    """One map from the maps of an engine's ranks: ``{label}/{name} -> hash``.

    Two ranks may report the same labelled name only with the same hash (a replicated
    copy); different hashes under one name are refused, since keeping either would hide
    the other. Hashes are opaque non-empty strings.
    """
    out: dict[str, str] = {}
    for label, hashes in per_rank:
        for name, value in hashes.items():
            if not isinstance(name, str) or not name or not isinstance(value, str) or not value:
                raise EngineChecksumError(
                    engine, f"rank {label} reported {name!r}: {value!r}, not a name and a hash"
                )
            key = f"{label}/{name}"
            if out.setdefault(key, value) != value:
                raise EngineChecksumError(
                    engine, f"two ranks report {key} with different hashes ({out[key]}, {value})"
                )
    if not out:
        raise EngineChecksumError(engine, "the engine reported no tensors")
    return out
