"""transformers.Trainer with FtauditCallback: 2 processes (torchrun, gloo DDP, CPU).

A clean run verifies; a run SIGKILLed inside step 5 and resumed with the Trainer's own
``resume_from_checkpoint`` (from checkpoint-3 = ftaudit iteration 2) verifies; the same
resume with ``ignore_data_skip=True`` reads the epoch's first batches again at the resumed
stream positions, and FT008 names those positions. The child is ``hf_child.py``
(transformers 5.24.0).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("transformers")

from tests.trainer_hooks.frameworks.checks import (
    allocated_samples,
    check_clean_run,
    check_resumed_run,
    restarted_epoch_is_caught,
    rows,
)
from tests.trainer_hooks.frameworks.launch import Runs, clean_kill_resume

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("hf_child.py")
STEPS, PER_STEP = 8, 8  # 2 ranks x 2 per device x 2 accumulated micro-batches


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("hf")
    return clean_kill_resume(CHILD, tmp, out="out", bug_mode="resume-ignore-data-skip")


def test_clean_run_verifies(runs: Runs) -> None:
    # every 3 steps, and at the end
    check_clean_run(
        runs.clean, runs.clean_done, steps=STEPS, per_step=PER_STEP, checkpoints=[2, 5, 7]
    )
    # two epochs of the 32 items: each once per epoch
    assert allocated_samples(runs.clean) == (64, 64)
    # each rank snapshots head and tail witness after each step: the whole global batch
    snaps = rows(
        runs.clean,
        "SELECT count(*), min(list_sum(nonzero_ids.lengths)) FROM witness_snapshot",
    )
    assert snaps[0][0] == STEPS * 2 * 2 and snaps[0][1] >= PER_STEP


def test_killed_then_resumed_verifies(runs: Runs) -> None:
    check_resumed_run(runs, loaded=["buffer", "data", "optim", "param", "rng", "sched"])
    # the crashed incarnation's steps 3 and 4 (and the unfinished 5) were abandoned
    abandoned = rows(
        runs.resumed,
        "SELECT step, status FROM timeline WHERE incarnation = 0 AND NOT committed ORDER BY 1",
    )
    assert [s for s, _ in abandoned] == [3, 4, 5]


def test_resume_with_ignore_data_skip_is_caught(runs: Runs) -> None:
    restarted_epoch_is_caught(runs, first_resumed_step=3, per_step=PER_STEP)
