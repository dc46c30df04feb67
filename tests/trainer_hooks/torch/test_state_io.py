"""Per-rank stateful objects beside a ``full`` or ``dcp`` checkpoint, and a resume that
grows the world: a new rank restores what every saved rank held identically, and is
refused, naming the checkpoint, the rank and the objects, where the state is per rank."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.torch.checksums import object_hash
from ftaudit.trainer_hooks.torch.state_io import (
    Layout,
    read_stateful,
    saved_stateful_ranks,
    write_stateful,
)


class RankRng:
    """A rank's own random stream (dropout, sampling): per-rank state by design."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def state_dict(self) -> dict[str, Any]:
        return {"rng": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["rng"])


def _scheduler(steps: int) -> torch.optim.lr_scheduler.StepLR:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    for _ in range(steps):
        optimizer.step()
        scheduler.step()
    return scheduler


def _save(how: Layout, path: Path, ranks: int, *, rng: bool) -> None:
    """What ``ranks`` ranks of a trained job save: one scheduler (the same on every rank)
    and, with ``rng``, each rank's own generator."""
    for rank in range(ranks):
        objects: dict[str, Any] = {"lr_scheduler": _scheduler(5)}
        if rng:
            objects["rng"] = RankRng(seed=rank)
        write_stateful(how, path, rank, objects)


def _where(how: Layout, tmp_path: Path) -> Path:
    path = tmp_path / ("ckpt_rank0" if how == "dcp" else "ckpt_rank0.pt")
    if how == "dcp":
        path.mkdir()
    return path


@pytest.mark.parametrize("how", ["full", "dcp"])
def test_a_new_rank_restores_state_every_saved_rank_held(how: Layout, tmp_path: Path) -> None:
    path = _where(how, tmp_path)
    _save(how, path, 2, rng=False)
    assert saved_stateful_ranks(how, path) == [0, 1]
    fresh = _scheduler(0)
    read_stateful(how, path, 3, {"lr_scheduler": fresh})  # the world grew from 2 to 4
    assert object_hash(fresh.state_dict()) == object_hash(_scheduler(5).state_dict())
    assert fresh.last_epoch == 5


@pytest.mark.parametrize("how", ["full", "dcp"])
def test_a_new_rank_is_refused_per_rank_state(how: Layout, tmp_path: Path) -> None:
    path = _where(how, tmp_path)
    _save(how, path, 2, rng=True)
    own = RankRng(seed=1)
    read_stateful(how, path, 1, {"lr_scheduler": _scheduler(0), "rng": own})  # its own file
    assert torch.equal(own.generator.get_state(), RankRng(seed=1).generator.get_state())
    objects = {"lr_scheduler": _scheduler(0), "rng": RankRng(seed=2)}
    with pytest.raises(UsageError) as refused:
        read_stateful(how, path, 2, objects)
    message = str(refused.value)
    assert f"checkpoint {path}: rank 2 has no saved state" in message, message
    assert "saved by ranks 0, 1" in message and "[rng] differ" in message, message
    assert "lr_scheduler" not in message, message  # it could have been restored


def test_one_saved_rank_shows_nothing_about_other_ranks(tmp_path: Path) -> None:
    path = _where("full", tmp_path)
    _save("full", path, 1, rng=False)
    with pytest.raises(
        UsageError,
        match=r"rank 1 has no saved state .*\(saved by rank 0: .*"
        r"with one saved rank nothing shows that \[lr_scheduler\]",
    ):
        read_stateful("full", path, 1, {"lr_scheduler": _scheduler(0)})


def test_a_checkpoint_without_per_rank_state_is_named(tmp_path: Path) -> None:
    path = _where("full", tmp_path)
    with pytest.raises(UsageError, match="no per-rank state was saved with checkpoint"):
        read_stateful("full", path, 0, {"lr_scheduler": _scheduler(0)})
