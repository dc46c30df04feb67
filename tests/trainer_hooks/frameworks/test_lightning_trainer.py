"""Lightning with FtauditCallback: 2 processes (torchrun, strategy ddp, gloo, CPU).

A clean run verifies; a run SIGKILLed inside step 5 and resumed with Lightning's own
``fit(ckpt_path=...)`` from ``epoch=0-step=3.ckpt`` (ftaudit iteration 2), with a loader
that keeps its position (``state_dict``), verifies; the same resume with a loader whose
``load_state_dict`` ignores the position reads the epoch's first batches again at the
resumed stream positions, and FT008 names those positions. The child is
``lightning_child.py`` (lightning 2.6.6).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("lightning")

import ftaudit
from ftaudit.verifier import verify
from tests.trainer_hooks.frameworks.checks import restarted_epoch_is_caught
from tests.trainer_hooks.frameworks.launch import Done, torchrun, wait_all

pytestmark = pytest.mark.slow

CHILD = Path(__file__).with_name("lightning_child.py")
STEPS, PER_STEP = 8, 8  # 2 ranks x 2 per batch x 2 accumulated micro-batches


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
    tmp = tmp_path_factory.mktemp("lightning")
    clean, killed, buggy = tmp / "clean", tmp / "killed", tmp / "buggy"

    def launch(where: Path, mode: str, log: str):  # type: ignore[no-untyped-def]
        return torchrun(CHILD, str(where / "run"), str(where / "ckpt"), mode, log=tmp / log)

    first = wait_all(launch(clean, "fresh", "clean.log"), launch(killed, "kill@5", "kill.log"))
    shutil.copytree(killed, buggy)  # the same crashed run, resumed twice
    second = wait_all(
        launch(killed, "resume", "resume.log"),
        launch(buggy, "resume-loader-not-restored", "bug.log"),
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
    per_step = _rows(
        runs.clean,
        "SELECT step, sum(num_ids), count(*) FROM witness_allocated WHERE num_ids > 0 "
        "GROUP BY step ORDER BY step",
    )
    assert per_step == [(s, PER_STEP, 2) for s in range(STEPS)]  # one per micro-batch
    distinct = _rows(
        runs.clean,
        "SELECT count(DISTINCT s) FROM (SELECT unnest(generate_series(r.s, r.s + r.l - 1)) "
        "AS s FROM (SELECT unnest(sample_indices.starts) AS s, unnest(sample_indices.lengths) "
        "AS l FROM witness_allocated) r)",
    )
    assert distinct == [(STEPS * PER_STEP,)]  # two epochs of 32 items, each once per epoch
    marks = _rows(runs.clean, "SELECT iteration FROM checkpoints WHERE complete ORDER BY 1")
    assert [i for (i,) in marks] == [2, 5]
    losses = _rows(runs.clean, "SELECT count(DISTINCT step) FROM metrics WHERE name = 'loss'")
    assert losses == [(STEPS,)]


def test_killed_then_resumed_verifies(runs: Runs) -> None:
    assert runs.killed_done.returncode != 0, "the SIGKILL should fail the first launch"
    assert runs.resumed_done.returncode == 0, runs.resumed_done.tail()
    report = verify(runs.resumed)
    assert report.passed(strict=True), report.to_dict()
    resumes = _rows(runs.resumed, "SELECT incarnation, resumed_iteration FROM resumes ORDER BY 1")
    assert resumes == [(0, None), (1, 2)]
    loaded = _rows(
        runs.resumed,
        "SELECT source_rank, list_sort(list_distinct(list_transform(map_keys(hashes), "
        "lambda k: split_part(k, '/', 1)))) FROM trainer_weight_checksum "
        "WHERE \"when\" = 'after_load' ORDER BY 1",
    )
    kinds = ["data", "optim", "param", "rng", "sched0"]
    assert loaded == [(0, kinds), (1, kinds)]


def test_resume_with_a_loader_not_restored_is_caught(runs: Runs) -> None:
    assert runs.buggy_done.returncode == 0, runs.buggy_done.tail()
    restarted_epoch_is_caught(runs.buggy, first_resumed_step=3, per_step=PER_STEP)
