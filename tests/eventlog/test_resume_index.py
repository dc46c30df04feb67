"""The resume index answers a resuming driver's questions from one read of the run, the same
answers the SQL views give, without DuckDB in the process."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ftaudit.eventlog import CheckpointRef, ResumeIndex, connect
from ftaudit.eventlog import resume as resume_module
from ftaudit.eventlog.compact import compact_run
from ftaudit.synth import synthesize
from ftaudit.trainer_hooks import DriverSession, ranks
from tests.support.synth_runs import small_synth

RESTARTS = small_synth(
    20, buffer_size=256, samples_per_step=16, restarts=2, retries=2, checkpoint_every=3, seed=11
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(tmp_path_factory.mktemp("resume") / "run", RESTARTS).run_dir


def _sql(run_dir: Path, sql: str, params: list | None = None) -> list[tuple]:
    with connect(run_dir) as con:
        return con.execute(sql, params or []).fetchall()


def test_answers_agree_with_the_sql_views(run: Path) -> None:
    index = ResumeIndex.open(run)
    complete = _sql(
        run,
        "SELECT DISTINCT iteration, incarnation FROM checkpoint_saved WHERE complete "
        "ORDER BY iteration, incarnation",
    )
    assert sorted({(c.ref.iteration, c.ref.incarnation) for c in index.checkpoints}) == complete
    assert len(complete) >= 3
    latest = max(complete, key=lambda c: (c[1], c[0]))
    assert index.latest_checkpoint().ref == CheckpointRef(
        iteration=latest[0], incarnation=latest[1]
    )
    for iteration, _ in complete:
        newest = max(inc for it, inc in complete if it == iteration)
        assert index.checkpoint_at(iteration) == CheckpointRef(
            iteration=iteration, incarnation=newest
        )
    assert index.checkpoint_at(10_000) is None
    ((highest,),) = _sql(run, "SELECT max(counter_after) FROM witness_allocated")
    assert index.highest_counter() == highest
    for ref in (c.ref for c in index.checkpoints):
        ((at,),) = _sql(
            run,
            "SELECT coalesce(max(counter_after), 0) FROM witness_allocated "
            "WHERE incarnation = ? AND step <= ?",
            [ref.incarnation, ref.iteration],
        )
        assert index.counter_at(ref) == at
    sizes = {r[0] for r in _sql(run, "SELECT DISTINCT buffer_size FROM run_started")}
    assert index.buffer_sizes == sizes == {RESTARTS.buffer_size}


def test_leftovers_of_a_cut_short_compaction_are_counted_once(run: Path, tmp_path: Path) -> None:
    """A compaction killed between its rename and its removals leaves originals that the
    merged segment holds: every answer, counts included, is the uncompacted run's."""
    before = ResumeIndex.open(run)
    cut = tmp_path / "run"
    shutil.copytree(run, cut)
    compact_run(cut, target_rows=50)
    compacted = ResumeIndex.open(cut)
    for old in (run / "events").glob("*/*.parquet"):  # put the removed originals back
        target = cut / "events" / old.parent.name / old.name
        if not target.exists():
            shutil.copy(old, target)
    index = ResumeIndex.open(cut)
    assert compacted.segments < before.segments
    assert index.segments == compacted.segments
    assert index.checkpoints == before.checkpoints
    for name in ("alloc_incarnation", "alloc_step", "alloc_counter"):
        assert sorted(getattr(index, name)) == sorted(getattr(before, name)), name
    assert index.buffer_sizes == before.buffer_sizes
    assert index.highest_counter() == before.highest_counter()


def test_a_directory_without_segments_is_an_empty_index(tmp_path: Path) -> None:
    for folder in (tmp_path / "missing", tmp_path):
        index = ResumeIndex.open(folder)
        assert index.empty and index.latest_checkpoint() is None
        assert index.highest_counter() == 0 and index.buffer_sizes == frozenset()


def _first_incarnation(run_dir: Path) -> None:
    driver = DriverSession.start(run_dir, buffer_size=100)
    for step in range(4):
        driver.allocate(step, 0, range(step * 10, step * 10 + 10))
        driver.end_attempt(step, 0, {0: ranks("normal")})
        if step == 1:
            driver.record_checkpoint(1)
    driver.flush()


def test_a_resume_reads_each_segment_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _first_incarnation(tmp_path)
    listings: list[Path] = []
    checked: list[Path] = []
    real_list, real_check = resume_module.list_segments, resume_module.check_segment

    def spy_list(run_dir, **kw):
        listings.append(Path(run_dir))
        return real_list(run_dir, **kw)

    def spy_check(file):
        checked.append(file.path)
        return real_check(file)

    monkeypatch.setattr(resume_module, "list_segments", spy_list)
    monkeypatch.setattr(resume_module, "check_segment", spy_check)
    index = ResumeIndex.open(tmp_path)
    second = DriverSession.start(
        tmp_path, buffer_size=100, resume_from=index.latest_checkpoint().ref, index=index
    )
    assert listings == [tmp_path]
    assert len(checked) == len(set(checked)) == index.segments
    assert second.allocator.counter == 40  # the highest counter, abandoned steps included
    assert second.resume_stale_ids == sorted(set(second.resume_stale_ids) | set(range(20, 40)))
    second.finish()


WRITER_ONLY = textwrap.dedent(
    """
    import sys
    from ftaudit.trainer_hooks import DriverSession, ranks
    run_dir = sys.argv[1]
    for incarnation in range(2):
        resume = 1 if incarnation else None
        driver = DriverSession.start(run_dir, buffer_size=100, resume_from=resume)
        for step in range(driver.first_step, 4):
            driver.allocate(step, 0, range(10))
            driver.end_attempt(step, 0, {0: ranks("normal")})
            if step == 1:
                driver.record_checkpoint(1)
        driver.finish()
    heavy = sorted(m for m in ("duckdb", "torch", "ftaudit.verifier") if m in sys.modules)
    print(",".join(heavy))
    """
)


def test_a_training_process_writes_and_resumes_without_duckdb(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WRITER_ONLY, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", done.stdout
