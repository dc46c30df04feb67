"""What every engine adapter gives: one map ``tensor name -> hash`` per engine (no torch).

Names carry the rank that holds the tensor, so the shards of a tensor-parallel engine
stay apart: ``tp1/model.layers.0.mlp.up_proj.weight``. Pipeline and data-parallel ranks
are added only when the engine has more than one of them (``pp1.tp0/...``,
``dp1.pp0.tp0/...``), so the names of a single-GPU engine are ``tp0/<name>``.

Hashes are the engine's own (SGLang's and vLLM's differ from ftaudit's blake2b), so the
engines compared after one sync must be of one kind; FT007 compares them tensor by
tensor.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

from ftaudit.errors import FtauditError

ERROR_TENSOR = "!error"
"""The tensor name under which a recorder logs an engine it could not read (see
:class:`ftaudit.trainer_hooks.engines.EngineChecksumRecorder`)."""


class EngineChecksumError(FtauditError):
    """An engine's weight checksums could not be read: unreachable, refused, or malformed."""

    def __init__(self, engine: str, reason: str) -> None:
        super().__init__(f"{engine}: {reason}")
        self.engine = engine
        self.reason = reason


@runtime_checkable
class WeightChecksumSource(Protocol):
    """Anything that can report the weight hashes of one inference engine."""

    kind: str
    """``sglang``, ``vllm``, ``torch``: engines of different kinds hash differently."""

    def describe(self) -> str:
        """A short name for messages, e.g. ``sglang http://10.0.0.3:30000``."""
        ...

    def checksums(self) -> dict[str, str]:
        """Tensor name (with its rank prefix) -> hash; raises :class:`EngineChecksumError`."""
        ...


def rank_prefix(
    tp_rank: int,
    *,
    pp_rank: int = 0,
    pp_size: int = 1,
    dp_rank: int = 0,
    dp_size: int = 1,
) -> str:
    """``tp{t}``, preceded by ``pp{p}.`` and ``dp{d}.`` where there are several of those."""
    for what, rank, size in (
        ("tp", tp_rank, None),
        ("pp", pp_rank, pp_size),
        ("dp", dp_rank, dp_size),
    ):
        if rank < 0 or (size is not None and not 0 <= rank < size):
            raise ValueError(f"{what} rank {rank} is not a rank of a group of {size}")
    parts = [f"dp{dp_rank}"] if dp_size > 1 else []
    if pp_size > 1:
        parts.append(f"pp{pp_rank}")
    parts.append(f"tp{tp_rank}")
    return ".".join(parts)


def merge_ranks(engine: str, per_rank: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, str]:
    """One map from the maps of an engine's ranks: ``{prefix}/{name} -> hash``.

    Two ranks may report the same prefixed name only with the same hash (a replicated
    copy); different hashes under one name are refused, since keeping either would hide
    the other.
    """
    out: dict[str, str] = {}
    for prefix, hashes in per_rank:
        for name, value in hashes.items():
            if not isinstance(name, str) or not isinstance(value, str) or not value:
                raise EngineChecksumError(
                    engine, f"rank {prefix} reported {name!r}: {value!r}, not a name and a hash"
                )
            key = f"{prefix}/{name}"
            if out.setdefault(key, value) != value:
                raise EngineChecksumError(
                    engine, f"two ranks report {key} with different hashes ({out[key]}, {value})"
                )
    if not out:
        raise EngineChecksumError(engine, "the engine reported no tensors")
    return out
