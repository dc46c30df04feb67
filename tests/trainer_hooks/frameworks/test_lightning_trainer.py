"""Lightning with FtauditCallback: 2 processes (torchrun, strategy ddp, gloo, CPU).

A clean run verifies; a run SIGKILLed inside step 5 and resumed with Lightning's own
``fit(ckpt_path=...)`` from ``epoch=0-step=3.ckpt`` (ftaudit iteration 2), with a loader
that keeps its position (``state_dict``), verifies; the same resume with a loader whose
``load_state_dict`` ignores the position reads the epoch's first batches again at the
resumed stream positions, and FT008 names those positions. The child is
``lightning_child.py`` (lightning 2.6.6).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lightning")

from tests.trainer_hooks.frameworks.checks import (
    allocated_samples,
    check_clean_run,
    check_resumed_run,
    restarted_epoch_is_caught,
)
from tests.trainer_hooks.frameworks.launch import Runs, clean_kill_resume

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("lightning_child.py")
STEPS, PER_STEP = 8, 8  # 2 ranks x 2 per batch x 2 accumulated micro-batches


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("lightning")
    return clean_kill_resume(CHILD, tmp, out="ckpt", bug_mode="resume-loader-not-restored")


def test_clean_run_verifies(runs: Runs) -> None:
    check_clean_run(runs.clean, runs.clean_done, steps=STEPS, per_step=PER_STEP, checkpoints=[2, 5])
    _, distinct = allocated_samples(runs.clean)
    assert distinct == STEPS * PER_STEP  # two epochs of 32 items, each once per epoch


def test_killed_then_resumed_verifies(runs: Runs) -> None:
    check_resumed_run(runs, loaded=["data", "optim", "param", "rng", "sched0"])


def test_resume_with_a_loader_not_restored_is_caught(runs: Runs) -> None:
    restarted_epoch_is_caught(runs, first_resumed_step=3, per_step=PER_STEP)
