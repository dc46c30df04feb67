"""Per-rank stateful objects beside a ``full`` or ``dcp`` checkpoint, and a resume that
grows the world: a new rank restores what every saved rank held identically, and is
refused, naming the checkpoint, the rank and the objects, where the state is per rank."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from ftaudit.errors import UsageError
from ftaudit.eventlog import CheckpointRef, ChecksumWhen
from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses
from ftaudit.trainer_hooks.torch.checksums import object_hash
from ftaudit.trainer_hooks.torch.state_io import (
    Layout,
    read_stateful,
    saved_stateful_ranks,
    stateful_path,
    write_stateful,
)
from ftaudit.verifier import verify
from tests.support.torch_models import make_model


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


def _grown_resume(tmp_path: Path, objects: Callable[[int], dict[str, Any]], bypass: bool) -> Any:
    """Ranks 0 and 1 of one cell save checkpoint 0 with their stateful objects beside a
    ``full`` checkpoint; the job resumes on 3 ranks. Ranks 0 and 1 restore their own
    copies; rank 2 restores through the hooks (``read_stateful``) or, with ``bypass``,
    as a trainer of its own would: rank 0's side file, the refusal never asked. Returns
    FT006's result over the run (real hooks, real checksums, real segments)."""
    run_dir, path = tmp_path / "run", _where("full", tmp_path)
    model = make_model(seed=0)
    install_witnesses(model, 8, layers="layers")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def hooks(incarnation: int, rank: int, state: dict[str, Any]) -> TrainerHooks:
        return TrainerHooks.attach(
            run_dir, incarnation, cell=0, rank=rank, model=model, optimizer=optimizer,
            stateful=state,
        )  # fmt: skip

    driver = DriverSession.start(run_dir, buffer_size=8)
    driver.allocate(0, 0, range(2))
    ref = CheckpointRef(iteration=0, incarnation=0)
    for rank in range(2):
        saved = objects(rank)
        write_stateful("full", path, rank, saved)
        trainer = hooks(0, rank, saved)
        with trainer.step(0, 0):
            trainer.log_checksums(ChecksumWhen.AT_SAVE, checkpoint=ref)
        trainer.close()
    driver.end_attempt(0, 0, {0: ranks("normal", "normal")})
    driver.record_checkpoint(0, path=str(path))
    driver.flush()

    driver = DriverSession.start(run_dir, resume_from=0, buffer_size=8)
    for rank in range(3):
        state = objects(10 + rank)  # a fresh process's own state, before the restore
        if rank == 2 and bypass:
            for name, obj in state.items():
                obj.load_state_dict(torch.load(stateful_path("full", path, 0))[name])
        else:
            read_stateful("full", path, rank, state)
        trainer = hooks(driver.incarnation, rank, state)
        with trainer.step(1, 0):
            trainer.log_checksums(ChecksumWhen.AFTER_LOAD, checkpoint=driver.resume_from)
        trainer.close()
    driver.finish()
    (result,) = verify(run_dir, select=["FT006"]).results
    return result


def test_a_new_rank_restoring_another_ranks_state_is_reported(tmp_path: Path) -> None:
    """What the hooks refuse, done by a trainer's own code, is caught by the verifier."""
    result = _grown_resume(tmp_path, lambda seed: {"rng": RankRng(seed)}, bypass=True)
    (found,) = result.violations
    assert found.kind == "foreign_copy" and found.location.rank == 2, found
    assert "rank 2 of cell 0 in incarnation 1 loaded checkpoint 0" in found.message, found
    assert "[stateful/rng]: ranks 0, 1 saved different copies" in found.message, found
    assert "it holds rank 0's copy of stateful/rng" in found.message, found


def test_a_new_rank_restoring_state_every_rank_held_verifies(tmp_path: Path) -> None:
    result = _grown_resume(tmp_path, lambda seed: {"lr_scheduler": _scheduler(5)}, bypass=False)
    assert result.checked and not result.violations, [v.message for v in result.violations]
