"""What the framework tests check of their runs: a clean run, a killed run resumed, and a
resume whose loader started its epoch over."""

from __future__ import annotations

from pathlib import Path

import ftaudit
from ftaudit.verifier import verify
from tests.trainer_hooks.frameworks.launch import Done, Runs

# every sample index each allocation names, one row each
ALLOCATED = (
    "SELECT unnest(generate_series(r.s, r.s + r.l - 1)) AS s FROM (SELECT "
    "unnest(sample_indices.starts) AS s, unnest(sample_indices.lengths) AS l "
    "FROM witness_allocated) r"
)


def rows(run: Path, query: str) -> list[tuple[object, ...]]:
    with ftaudit.connect(run) as con:
        return con.execute(query).fetchall()


def allocated_samples(run: Path) -> tuple[object, ...]:
    """How many sample indices the run allocated, and how many distinct ones."""
    return rows(run, f"SELECT count(*), count(DISTINCT s) FROM ({ALLOCATED})")[0]


def check_clean_run(
    run: Path, done: Done, *, steps: int, per_step: int, checkpoints: list[int]
) -> None:
    """A clean run exits 0 and verifies strictly; each of its ``steps`` steps commits once
    and allocates ``per_step`` ids in two allocations (one per micro-batch); the complete
    checkpoints are ``checkpoints``, and every step logs its loss."""
    assert done.returncode == 0, done.tail()
    report = verify(run)
    assert report.passed(strict=True), report.to_dict()
    committed = rows(run, "SELECT step FROM committed_steps ORDER BY step")
    assert [s for (s,) in committed] == list(range(steps))
    per_step_rows = rows(
        run,
        "SELECT step, sum(num_ids), count(*) FROM witness_allocated WHERE num_ids > 0 "
        "GROUP BY step ORDER BY step",
    )
    assert per_step_rows == [(s, per_step, 2) for s in range(steps)]
    marks = rows(run, "SELECT iteration FROM checkpoints WHERE complete ORDER BY 1")
    assert [i for (i,) in marks] == checkpoints
    losses = rows(run, "SELECT count(DISTINCT step) FROM metrics WHERE name = 'loss'")
    assert losses == [(steps,)]


def check_resumed_run(runs: Runs, *, loaded: list[str]) -> None:
    """The SIGKILL failed the first launch; the resume from iteration 2 exits 0 and
    verifies strictly, and what each rank loaded hashes equal to what it saved, for
    every kind of state in ``loaded`` (``param``, ``optim``, ``rng``...)."""
    assert runs.killed_done.returncode != 0, "the SIGKILL should fail the first launch"
    assert runs.resumed_done.returncode == 0, runs.resumed_done.tail()
    report = verify(runs.resumed)
    assert report.passed(strict=True), report.to_dict()
    resumes = rows(runs.resumed, "SELECT incarnation, resumed_iteration FROM resumes ORDER BY 1")
    assert resumes == [(0, None), (1, 2)]
    kinds = rows(
        runs.resumed,
        "SELECT source_rank, list_sort(list_distinct(list_transform(map_keys(hashes), "
        "lambda k: split_part(k, '/', 1)))) FROM trainer_weight_checksum "
        "WHERE \"when\" = 'after_load' ORDER BY 1",
    )
    assert kinds == [(0, loaded), (1, loaded)]


def _resumed_positions(run: Path, step: int) -> list[int]:
    """The sample indices incarnation 1 allocated in ``step``."""
    with ftaudit.connect(run) as con:
        return con.execute(
            "SELECT list_sort(flatten(list(generate_series(r.s, r.s + r.l - 1)))) FROM ("
            "SELECT unnest(sample_indices.starts) AS s, unnest(sample_indices.lengths) AS l "
            "FROM witness_allocated WHERE incarnation = 1 AND step = ?) r",
            [step],
        ).fetchall()[0][0]


def restarted_epoch_is_caught(runs: Runs, *, first_resumed_step: int, per_step: int) -> None:
    """The buggy resume exits 0, but its resumed positions read the epoch's first items
    again: FT008 names them.

    The stream positions themselves stay contiguous (FT005 has nothing to say), and the
    weights hold exactly the trained samples (FT004 is clean): what is wrong is which
    items those positions read, against the order the sampler declared for the epoch.
    """
    assert runs.buggy_done.returncode == 0, runs.buggy_done.tail()
    run = runs.buggy
    report = verify(run)
    assert not report.passed()
    by_code = {r.code: r for r in report.results}
    ft008 = by_code["FT008"]
    wrong = [v for v in ft008.violations if v.kind == "wrong_item"]
    assert wrong, report.to_dict()
    named = {s for v in wrong for s in v.sample_indices}
    start = first_resumed_step * per_step  # the checkpoint's consumed count
    first = _resumed_positions(run, first_resumed_step)
    assert first == list(range(start, start + per_step)) and set(first) <= named
    assert f"position {start} read item" in " ".join(v.message for v in wrong)
    twice = [v for v in ft008.violations if v.kind == "duplicate_content"]
    assert any("in epoch 0" in v.message for v in twice), report.to_dict()
    assert by_code["FT005"].errors == 0 and by_code["FT004"].errors == 0
