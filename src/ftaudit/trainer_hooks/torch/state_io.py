"""How a rank's model and optimizer state go to disk and back, for each checkpoint layout.

- ``local``: this process's own ``state_dict()`` with ``torch.save`` (a replicated model,
  or one file per rank). Written atomically (temp file, fsync, rename).
- ``full``: the full, unsharded state (``get_state_dict(full_state_dict=True)``, a
  collective for a sharded model) written by global rank 0 only; every rank loads the
  same file and keeps its own part (``set_state_dict``). "Rank 0 saves a full state dict".
- ``dcp``: ``torch.distributed.checkpoint``: every rank writes its shards into one
  directory and loads its part back, in any layout (DCP reshards).

Only ``local`` carries fp32 master copies (``master_params``); the distributed layouts
go through PyTorch's ``state_dict`` API, which knows the optimizer's own state only.
Registered stateful objects (an RNG, a data loader) are per rank: ``local`` keeps them in
the rank's file, the others in a side file per rank (:func:`stateful_path`). A resume that
grows the world has ranks the save did not: such a rank restores an object only where
every saved rank (two at least) held it identically, which shows it is not per rank (an
LR scheduler, a grad scaler); otherwise :func:`read_stateful` refuses, naming the
checkpoint, the rank and the objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import torch
import torch.distributed as dist
from torch import nn

from ftaudit.errors import UsageError
from ftaudit.eventlog.atomic import atomic_path, write_bytes_atomically
from ftaudit.trainer_hooks.torch.checksums import object_hash, unwrap
from ftaudit.trainer_hooks.torch.state_scalars import Stateful

Layout = Literal["local", "full", "dcp"]

DCP_META = "ftaudit.json"
"""In a DCP directory: the iteration and ``extra`` (JSON), written by rank 0."""


def write_state(
    how: Layout,
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    master: Mapping[nn.Parameter, torch.Tensor],
    stateful: Mapping[str, Stateful],
    iteration: int,
    extra: Mapping[str, Any],
) -> bool:
    """Save this rank's part of the state; True if this rank wrote part of the checkpoint."""
    if how != "local" and master:
        raise UsageError(f"a {how!r} checkpoint cannot carry fp32 master copies: use 'local'")
    if how == "local":
        state = {
            "iteration": iteration,
            "model": unwrap(model).state_dict(),
            "optimizer": optimizer.state_dict(),
            "master": [m.detach().clone() for m in master.values()],
            "stateful": {name: obj.state_dict() for name, obj in stateful.items()},
            "extra": dict(extra),
        }
        _atomic_save(state, path)
        return True
    # DCP loads torch.distributed.tensor (over a second of CPU): only these layouts need it
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

    if stateful:
        write_stateful(how, path, _global_rank(), stateful)
    if how == "full":
        options = StateDictOptions(full_state_dict=True, cpu_offload=True)
        model_state, optim_state = get_state_dict(model, optimizer, options=options)
        if _global_rank() != 0:
            return False
        state = {
            "iteration": iteration,
            "model": model_state,
            "optimizer": optim_state,
            "extra": dict(extra),
        }
        _atomic_save(state, path)
        return True
    if how == "dcp":
        model_state, optim_state = get_state_dict(model, optimizer)
        dcp.save({"model": model_state, "optimizer": optim_state}, checkpoint_id=str(path))
        if _global_rank() == 0:
            meta = json.dumps({"iteration": iteration, "extra": dict(extra)})
            write_bytes_atomically(path / DCP_META, meta.encode())
        return True
    raise UsageError(f"unknown checkpoint layout {how!r}: use 'local', 'full' or 'dcp'")


def read_state(
    how: Layout,
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    master: Mapping[nn.Parameter, torch.Tensor],
    stateful: Mapping[str, Stateful],
) -> dict[str, Any]:
    """Load this rank's part of the state; returns ``{"iteration": ..., "extra": {...}}``."""
    if how != "local" and stateful:
        read_stateful(how, path, _global_rank(), stateful)
    if how == "local":
        state = torch.load(path, map_location="cpu", weights_only=True)
        unwrap(model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        with torch.no_grad():
            for copy, saved in zip(master.values(), state["master"], strict=True):
                copy.copy_(saved)
        _restore(stateful, state.get("stateful", {}))
        return {"iteration": state["iteration"], "extra": state["extra"]}
    import torch.distributed.checkpoint as dcp  # only here: see write_state
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_state_dict,
        set_state_dict,
    )

    if how == "full":
        state = torch.load(path, map_location="cpu", weights_only=True)
        set_state_dict(
            model,
            optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optimizer"],
            options=StateDictOptions(full_state_dict=True),
        )
        return {"iteration": state["iteration"], "extra": state["extra"]}
    if how == "dcp":
        model_state, optim_state = get_state_dict(model, optimizer)
        loaded = {"model": model_state, "optimizer": optim_state}
        dcp.load(loaded, checkpoint_id=str(path))
        set_state_dict(
            model,
            optimizer,
            model_state_dict=loaded["model"],
            optim_state_dict=loaded["optimizer"],
        )
        return json.loads((path / DCP_META).read_text())
    raise UsageError(f"unknown checkpoint layout {how!r}: use 'local', 'full' or 'dcp'")


def stateful_path(how: Layout, path: Path, rank: int) -> Path:
    """Where a ``full`` or ``dcp`` checkpoint keeps the stateful objects of ``rank``."""
    folder, head, tail = _stateful_names(how, path)
    return folder / f"{head}{rank}{tail}"


def _stateful_names(how: Layout, path: Path) -> tuple[Path, str, str]:
    """The folder of the side files and their names before and after the rank."""
    if how == "dcp":
        return path, "ftaudit_stateful.rank", ".pt"
    return path.parent, f"{path.name}.stateful.rank", ""


def write_stateful(how: Layout, path: Path, rank: int, stateful: Mapping[str, Stateful]) -> None:
    """Save ``rank``'s stateful objects beside a ``full`` or ``dcp`` checkpoint."""
    own = {name: obj.state_dict() for name, obj in stateful.items()}
    _atomic_save(own, stateful_path(how, path, rank))


def read_stateful(how: Layout, path: Path, rank: int, stateful: Mapping[str, Stateful]) -> None:
    """Restore ``rank``'s stateful objects from beside a ``full`` or ``dcp`` checkpoint.

    A rank the save did not have (a resume that grew the world) takes the saved ranks'
    copy of each object where they all hold the same state, two ranks at least: that
    the state does not depend on the rank is then shown, not assumed (an LR scheduler,
    a grad scaler). Anything else (an RNG, a loader position, or a single saved rank)
    raises :class:`UsageError` naming the checkpoint, the rank and the objects.
    """
    own = stateful_path(how, path, rank)
    if own.exists():
        _restore(stateful, torch.load(own, weights_only=True))
        return
    ranks = saved_stateful_ranks(how, path)
    if not ranks:
        raise UsageError(f"{own}: no per-rank state was saved with checkpoint {path}")
    saved = [torch.load(stateful_path(how, path, r), weights_only=True) for r in ranks]
    names = sorted(stateful)
    per_rank = [n for n in names if len({object_hash(s.get(n)) for s in saved}) > 1]
    if len(ranks) < 2 or per_rank:
        why = (
            f"{_names(per_rank)} differ between the saved ranks (state of one rank), so "
            "no saved copy is this rank's"
            if per_rank
            else f"with one saved rank nothing shows that {_names(names)} is the same on every rank"
        )
        raise UsageError(
            f"checkpoint {path}: rank {rank} has no saved state of its registered stateful "
            f"objects (saved by rank{'s' if len(ranks) > 1 else ''} "
            f"{', '.join(map(str, ranks))}: the resume grew the world) and {why}; resume on "
            f"{len(ranks)} rank(s), or leave these objects out of stateful= and restore "
            "them yourself"
        )
    _restore(stateful, saved[0])


def saved_stateful_ranks(how: Layout, path: Path) -> list[int]:
    """The ranks whose stateful objects a ``full`` or ``dcp`` checkpoint holds."""
    folder, head, tail = _stateful_names(how, path)
    if not folder.is_dir():
        return []
    name = re.compile(f"{re.escape(head)}(\\d+){re.escape(tail)}")
    found = (name.fullmatch(p.name) for p in folder.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def _names(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _restore(stateful: Mapping[str, Stateful], saved: Mapping[str, Any]) -> None:
    for name, obj in stateful.items():
        if name in saved:
            obj.load_state_dict(saved[name])


def _global_rank() -> int:
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def _atomic_save(state: dict[str, Any], target: Path) -> None:
    with atomic_path(target) as tmp:
        torch.save(state, tmp)
