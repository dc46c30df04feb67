"""Issue 14 items 2, 3 and 6: samples whose gradient is (or is not) exactly zero, and a
step with no samples, in real RL training."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ftaudit.verifier import verify
from tests.false_alarms.cells import Job, failures, policy

pytestmark = pytest.mark.slow


def _groups(samples: np.ndarray) -> np.ndarray:
    """GRPO advantages: groups of 4; every third group has equal rewards (all zero)."""
    adv = np.where(samples % 4 < 2, 1.0, -1.0)
    return np.where((samples // 4) % 3 == 0, 0.0, adv)


def _rl(tmp_path: Path, *, kl: float, pure: bool, masked=None) -> Path:
    job = Job.start(
        tmp_path / "run",
        loss=policy(kl),
        advantages=_groups,
        pure_advantage_loss=pure,
        log_advantages=True,
        **({"masked": masked} if masked is not None else {}),
    )
    for step in range(6):
        job.step(step, range(8 * step, 8 * step + 8))
    job.finish()
    return tmp_path / "run"


def test_a_kl_penalty_declared_impure_verifies(tmp_path: Path) -> None:
    """Zero-advantage samples get gradient from the KL term: expected, not leaked."""
    report = verify(_rl(tmp_path, kl=0.1, pure=False))
    assert report.passed(strict=True), failures(report)
    ft004 = next(r for r in report.results if r.code == "FT004")
    assert ft004.counts == {"excused_zero_advantage": 0, "excused_no_tokens": 0}


def test_a_kl_penalty_declared_pure_is_reported(tmp_path: Path) -> None:
    """The twin: the same loss declared pure; zero-advantage rows are nonzero: extra."""
    report = verify(_rl(tmp_path, kl=0.1, pure=True))
    kinds = {v.kind for r in report.results for v in r.violations}
    assert kinds == {"extra"}, failures(report)


def test_a_pure_advantage_loss_excuses_zero_advantage_samples(tmp_path: Path) -> None:
    report = verify(_rl(tmp_path, kl=0.0, pure=True))
    assert report.passed(strict=True), failures(report)
    ft004 = next(r for r in report.results if r.code == "FT004")
    assert ft004.counts["excused_zero_advantage"] == 16  # groups 0, 3, 6, 9 of 4 samples


def test_fully_masked_samples_are_excused_and_counted(tmp_path: Path) -> None:
    def masked(samples: np.ndarray) -> np.ndarray:
        return samples % 8 == 5  # one sample per step has no loss tokens

    report = verify(_rl(tmp_path, kl=0.1, pure=False, masked=masked))
    assert report.passed(strict=True), failures(report)
    ft004 = next(r for r in report.results if r.code == "FT004")
    assert ft004.counts == {"excused_zero_advantage": 0, "excused_no_tokens": 6}


def test_a_mostly_masked_step_warns(tmp_path: Path) -> None:
    def masked(samples: np.ndarray) -> np.ndarray:
        return (samples >= 16) & (samples < 24) & (samples % 8 != 0)  # step 2: 7 of 8

    report = verify(_rl(tmp_path, kl=0.1, pure=False, masked=masked))
    assert report.passed(), failures(report)
    found = [(v.kind, v.location.step) for r in report.results for v in r.violations]
    assert found == [("mostly_excused", 2)], failures(report)


def test_a_step_without_samples_is_checked(tmp_path: Path) -> None:
    """Step 3 has no samples (all rollouts filtered): an empty allocation, still checked."""
    job = Job.start(tmp_path / "run")
    samples = 0
    for step in range(6):
        n = 0 if step == 3 else 8
        job.step(step, range(samples, samples + n))
        samples += n
    report = job.finish()
    assert report.passed(strict=True), failures(report)
    ft004 = next(r for r in report.results if r.code == "FT004")
    assert ft004.checked == 6 * 2 * 2  # every committed step, both cells, head and tail


@pytest.mark.parametrize("durable", [True, False])
def test_a_cell_dying_after_the_exchange_keeps_its_excusals(tmp_path: Path, durable: bool) -> None:
    """Cell 0 dies right after the gradient exchange of the last step; cell 1 commits the
    whole batch. Its advantage summary was flushed before the exchange (the hooks'
    default), so its zero-advantage samples stay excused; unflushed, they read as lost."""
    job = Job.start(tmp_path / "run", loss=policy(), advantages=_groups, log_advantages=True)
    if not durable:
        hooks = job.replicas[0].hooks
        log = hooks.log_sample_advantages
        hooks.log_sample_advantages = lambda *a, **k: log(*a, **{**k, "flush": False})  # type: ignore[method-assign]
    for step in range(3):
        job.step(step, range(8 * step, 8 * step + 8))
    job.attempt(3, 0, range(24, 32), dies=0)  # samples 24..27: a zero-advantage group
    report = job.finish()
    if durable:
        assert report.passed(strict=True), failures(report)
    else:
        found = {(v.kind, v.location.step) for r in report.results for v in r.violations}
        assert ("missing", 3) in found, failures(report)
