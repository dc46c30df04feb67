"""transformers.Trainer with FtauditCallback: 2 processes (torchrun, gloo DDP, CPU).

A clean run verifies; a run SIGKILLed inside step 5 and resumed with the Trainer's own
``resume_from_checkpoint`` (from checkpoint-3 = ftaudit iteration 2) verifies; the same
resume with ``ignore_data_skip=True`` reads the epoch's first batches again at the resumed
stream positions, and FT008 names those positions. The child is ``hf_child.py``
(transformers 5.24.0).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("transformers")

import ftaudit
from ftaudit.verifier import verify
from tests.trainer_hooks.frameworks.checks import restarted_epoch_is_caught
from tests.trainer_hooks.frameworks.launch import Done, torchrun, wait_all

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("hf_child.py")
STEPS, PER_STEP = 8, 8  # 2 ranks x 2 per device x 2 accumulated micro-batches


@dataclass(frozen=True)
class Runs:
    clean: Path
    clean_done: Done
    killed_done: Done
    resumed: Path
    resumed_done: Done
    buggy: Path
    buggy_done: Done


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    tmp = tmp_path_factory.mktemp("hf")
    clean, killed = tmp / "clean", tmp / "killed"
    first = wait_all(
        torchrun(CHILD, str(clean / "run"), str(clean / "out"), "fresh", log=tmp / "clean.log"),
        torchrun(CHILD, str(killed / "run"), str(killed / "out"), "kill@5", log=tmp / "kill.log"),
    )
    buggy = tmp / "buggy"
    shutil.copytree(killed, buggy)  # the same crashed run, resumed twice
    second = wait_all(
        torchrun(CHILD, str(killed / "run"), str(killed / "out"), "resume", log=tmp / "res.log"),
        torchrun(
            CHILD,
            str(buggy / "run"),
            str(buggy / "out"),
            "resume-ignore-data-skip",
            log=tmp / "bug.log",
        ),
    )
    return Runs(
        clean / "run", first[0], first[1], killed / "run", second[0], buggy / "run", second[1]
    )


def _rows(run: Path, query: str) -> list[tuple[object, ...]]:
    with ftaudit.connect(run) as con:
        return con.execute(query).fetchall()


def test_clean_run_verifies(runs: Runs) -> None:
    assert runs.clean_done.returncode == 0, runs.clean_done.tail()
    report = verify(runs.clean)
    assert report.passed(strict=True), report.to_dict()
    committed = _rows(runs.clean, "SELECT step FROM committed_steps ORDER BY step")
    assert [s for (s,) in committed] == list(range(STEPS))
    # every optimizer step allocated for all 8 samples of both ranks' 2 micro-batches
    per_step = _rows(
        runs.clean,
        "SELECT step, sum(num_ids), count(*) FROM witness_allocated WHERE num_ids > 0 "
        "GROUP BY step ORDER BY step",
    )
    assert per_step == [(s, PER_STEP, 2) for s in range(STEPS)]
    # two epochs of the 32 items: each once per epoch
    samples = _rows(
        runs.clean,
        "SELECT count(*), count(DISTINCT s) FROM (SELECT unnest(generate_series(r.s, "
        "r.s + r.l - 1)) AS s FROM (SELECT unnest(sample_indices.starts) AS s, "
        "unnest(sample_indices.lengths) AS l FROM witness_allocated) r)",
    )
    assert samples == [(64, 64)]
    # each rank snapshots head and tail witness after each step: the whole global batch
    snaps = _rows(
        runs.clean,
        "SELECT count(*), min(list_sum(nonzero_ids.lengths)) FROM witness_snapshot",
    )
    assert snaps[0][0] == STEPS * 2 * 2 and snaps[0][1] >= PER_STEP
    marks = _rows(runs.clean, "SELECT iteration FROM checkpoints WHERE complete ORDER BY 1")
    assert [i for (i,) in marks] == [2, 5, 7]  # every 3 steps, and at the end
    losses = _rows(runs.clean, "SELECT count(DISTINCT step) FROM metrics WHERE name = 'loss'")
    assert losses == [(STEPS,)]


def test_killed_then_resumed_verifies(runs: Runs) -> None:
    assert runs.killed_done.returncode != 0, "the SIGKILL should fail the first launch"
    assert runs.resumed_done.returncode == 0, runs.resumed_done.tail()
    report = verify(runs.resumed)
    assert report.passed(strict=True), report.to_dict()
    resumes = _rows(runs.resumed, "SELECT incarnation, resumed_iteration FROM resumes ORDER BY 1")
    assert resumes == [(0, None), (1, 2)]
    # the crashed incarnation's steps 3 and 4 (and the unfinished 5) were abandoned
    abandoned = _rows(
        runs.resumed,
        "SELECT step, status FROM timeline WHERE incarnation = 0 AND NOT committed ORDER BY 1",
    )
    assert [s for s, _ in abandoned] == [3, 4, 5]
    # what each rank loaded hashes equal to what it saved, beyond model and optimizer
    loaded = _rows(
        runs.resumed,
        "SELECT source_rank, list_sort(list_distinct(list_transform(map_keys(hashes), "
        "lambda k: split_part(k, '/', 1)))) FROM trainer_weight_checksum "
        "WHERE \"when\" = 'after_load' ORDER BY 1",
    )
    kinds = ["buffer", "data", "optim", "param", "rng", "sched"]
    assert loaded == [(0, kinds), (1, kinds)]


def test_resume_with_ignore_data_skip_is_caught(runs: Runs) -> None:
    assert runs.buggy_done.returncode == 0, runs.buggy_done.tail()
    restarted_epoch_is_caught(runs.buggy, first_resumed_step=3, per_step=PER_STEP)
