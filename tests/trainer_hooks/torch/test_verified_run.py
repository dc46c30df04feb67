"""End to end with the verifier: retries and a resume pass ft-verify; a leaked retry fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses
from tests.support.torch_models import lm_backward, make_model, tokens

pytestmark = [pytest.mark.torch, pytest.mark.slow]
B, BATCH, SEQ = 40, 4, 6


def _worker(run_dir: Path, incarnation: int, seed: int) -> TrainerHooks:
    model = make_model(seed=seed)
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return TrainerHooks.attach(
        run_dir, incarnation, cell=0, rank=0, model=model, optimizer=optimizer
    )


def _step(driver: DriverSession, hooks: TrainerHooks, step: int, retry: bool, leak: bool) -> None:
    """One step; with ``retry`` attempt 0 is discarded (and with ``leak`` wrongly applied)."""
    attempt = 0
    while True:
        info = driver.allocate(step, attempt, range(step * BATCH, (step + 1) * BATCH))
        toks = tokens(BATCH, SEQ, seed=step)
        with hooks.step(step, attempt):
            lm_backward(hooks, info.witness_ids, toks)
            if retry and attempt == 0:
                if leak:
                    hooks.optimizer.step()  # the bug: a discarded attempt reaches the weights
                outcome = ranks("discarded_should_retry")
            else:
                hooks.optimizer.step()
                hooks.after_optimizer_step(info.stale_ids, checksum=True)
                outcome = ranks("normal")
        if driver.end_attempt(step, attempt, {0: outcome}):
            return
        attempt += 1


def _run(
    tmp_path: Path, leak: bool, die_after: int = 3, checkpoint_at: int = 1
) -> subprocess.CompletedProcess[str]:
    run_dir, ckpt = tmp_path / "run", tmp_path / "ckpt.pt"
    meta = {"buffer_size": B, "dataset_size": 1000, "deterministic_order": True}
    driver = DriverSession.start(run_dir, **meta)
    hooks = _worker(run_dir, 0, seed=0)
    for step in range(die_after + 1):
        _step(driver, hooks, step, retry=step == 2, leak=False)
        if step == checkpoint_at:
            with hooks.step(step, 0):
                hooks.save_checkpoint(ckpt, iteration=step)
            driver.record_checkpoint(step, path=str(ckpt))
    hooks.flush()
    driver.flush()  # the job dies after step `die_after`: steps 2.. are abandoned

    driver = DriverSession.start(run_dir, resume_from=checkpoint_at, **meta)
    hooks = _worker(run_dir, driver.incarnation, seed=5)
    with hooks.step(driver.first_step, 0):
        hooks.load_checkpoint(
            ckpt, checkpoint=driver.resume_from, resume_stale_ids=driver.resume_stale_ids
        )
    for step in range(driver.first_step, die_after + 9):  # 48+ ids: the ring of 40 wraps
        _step(driver, hooks, step, retry=step == 7, leak=leak)
    hooks.close()
    driver.finish()
    return subprocess.run(
        [str(Path(sys.executable).with_name("ft-verify")), str(run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_retries_and_resume_verify(tmp_path: Path) -> None:
    result = _run(tmp_path, leak=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_leaked_retry_is_reported(tmp_path: Path) -> None:
    result = _run(tmp_path, leak=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FT004" in result.stdout


def test_resume_after_a_long_abandoned_stretch_verifies(tmp_path: Path) -> None:
    """The checkpoint of step 7 holds rows of a wrapped ring (36 ids > keep = 28); the
    abandoned steps 8..12 used 20 ids, more than B - keep = 12, so they re-allocated slots
    whose restored rows hold committed evidence. The resume zeroes those slots too, so the
    restored rows are exact and FT004 holds."""
    result = _run(tmp_path, leak=False, die_after=12, checkpoint_at=7)
    assert result.returncode == 0, result.stdout + result.stderr
