"""What a trainer declares instead of the usual evidence, end to end.

Restore evidence by adoption (FT009): a resumed incarnation whose rank kept its live state
(an in-memory replica that survived the restart) says so, and verifies; the same resume
without a load and without that statement is an unrestored rank. An intended change of the
trainable parameters (FT012), declared first, verifies; undeclared, it is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses
from ftaudit.verifier import verify
from tests.support.torch_models import lm_backward, make_model, tokens

pytestmark = pytest.mark.torch
B, BATCH, SEQ = 40, 4, 6
META = {"buffer_size": B, "dataset_size": 1000, "deterministic_order": True}


def _start(run_dir: Path) -> tuple[DriverSession, TrainerHooks]:
    """Incarnation 0 of a one-rank run with witnesses."""
    model = make_model(seed=0)
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    driver = DriverSession.start(run_dir, **META)
    hooks = TrainerHooks.attach(run_dir, 0, cell=0, rank=0, model=model, optimizer=optimizer)
    return driver, hooks


def _train(driver: DriverSession, hooks: TrainerHooks, steps: range) -> None:
    for step in steps:
        info = driver.allocate(step, 0, range(step * BATCH, (step + 1) * BATCH))
        toks = tokens(BATCH, SEQ, seed=step)
        with hooks.step(step, 0):
            lm_backward(hooks, info.witness_ids, toks)
            hooks.optimizer.step()
            hooks.after_optimizer_step(info.stale_ids, checksum=True)
        driver.end_attempt(step, 0, {0: ranks("normal")})


def _resume_keeping_live_state(run_dir: Path, ckpt: Path, *, adopt: bool) -> None:
    driver, hooks = _start(run_dir)
    model, optimizer = hooks.model, hooks.optimizer
    _train(driver, hooks, range(2))
    with hooks.step(1, 0):
        hooks.save_checkpoint(ckpt, iteration=1)
    driver.record_checkpoint(1, path=str(ckpt))
    hooks.close()
    driver.flush()  # the driver process dies here; the trainer's model lives on

    driver = DriverSession.start(run_dir, resume_from=1, **META)
    hooks = TrainerHooks.attach(
        run_dir, driver.incarnation, cell=0, rank=0, model=model, optimizer=optimizer
    )
    if adopt:
        with hooks.step(driver.first_step, 0):
            hooks.adopt_live_state("the trainer outlived the driver", checkpoint=driver.resume_from)
            hooks.clear_at_resume(driver.resume_stale_ids)
    _train(driver, hooks, range(driver.first_step, 5))
    hooks.close()
    driver.finish()


def test_adopted_live_state_is_restore_evidence(tmp_path: Path) -> None:
    _resume_keeping_live_state(tmp_path / "run", tmp_path / "ckpt.pt", adopt=True)
    report = verify(tmp_path / "run")
    assert report.passed(), [v.message for r in report.results for v in r.violations]
    ft009 = next(r for r in report.results if r.code == "FT009")
    assert ft009.checked > 0


def test_resume_without_load_or_adoption_is_an_unrestored_rank(tmp_path: Path) -> None:
    _resume_keeping_live_state(tmp_path / "run", tmp_path / "ckpt.pt", adopt=False)
    report = verify(tmp_path / "run")
    failed = {v.kind for r in report.results if r.code == "FT009" for v in r.violations}
    assert failed == {"unrestored_rank"}, [v.message for r in report.results for v in r.violations]


def _freeze_head_after(run_dir: Path, step: int, *, declare: bool) -> None:
    driver, hooks = _start(run_dir)
    _train(driver, hooks, range(step + 1))
    if declare:
        hooks.declare_parameter_change("the head is frozen on schedule")
    hooks.model.head.requires_grad_(False)
    _train(driver, hooks, range(step + 1, 5))
    hooks.close()
    driver.finish()


def test_declared_parameter_change_verifies(tmp_path: Path) -> None:
    _freeze_head_after(tmp_path / "run", 2, declare=True)
    report = verify(tmp_path / "run")
    assert report.passed(), [v.message for r in report.results for v in r.violations]


def test_undeclared_parameter_change_is_reported(tmp_path: Path) -> None:
    _freeze_head_after(tmp_path / "run", 2, declare=False)
    report = verify(tmp_path / "run")
    failed = [v for r in report.results for v in r.violations]
    assert {r.code for r in report.results if r.violations} == {"FT012"}, failed
    assert any("head" in v.message for v in failed), failed
