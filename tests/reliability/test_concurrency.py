"""Sixteen trainer processes log 100,000 events each at once: nothing lost, FT001 exact."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import duckdb
import pytest

from ftaudit.eventlog import RunLog, list_segments, scan_run
from ftaudit.verifier import verify
from tests.reliability.concurrency_child import train


def _run(run_dir: Path, processes: int, events: int) -> float:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["tests.reliability.concurrency_child"])
    run = RunLog.start(run_dir, buffer_size=8)
    start = ctx.Barrier(processes + 1)
    procs = [
        ctx.Process(target=train, args=(str(run_dir), cell, events, start))
        for cell in range(processes)
    ]
    for proc in procs:
        proc.start()
    start.wait()
    began = time.perf_counter()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0
    seconds = time.perf_counter() - began
    run.finish()
    return seconds


def _check(run_dir: Path, processes: int, events: int) -> None:
    files = [str(s.path) for s in scan_run(run_dir).segments if "trainer" in s.meta.writer]
    with duckdb.connect() as con:
        rows = con.execute(
            """SELECT writer, count(*), count(DISTINCT seq), min(seq), max(seq),
                      bool_and(map_extract("metric.values", 'i')[1] = seq)
               FROM read_parquet(?, union_by_name = true) GROUP BY writer""",
            [files],
        ).fetchall()
    assert len(rows) == processes
    for writer, n, distinct, lo, hi, values_ok in rows:
        assert (n, distinct, lo, hi) == (events, events, 0, events - 1), writer
        assert values_ok, f"{writer}: an event holds another event's value"
    (result,) = verify(run_dir, select=["FT001"]).results
    assert result.violations == ()


def _delete_one_segment_and_expect_its_hole(run_dir: Path) -> None:
    """A middle flush as listed (the last one's loss only a checkpoint could reveal; a
    merged segment of the writer's last roll would leave its originals to read)."""
    writers = list_segments(run_dir).writers
    trainer = max((w for w in writers if w.startswith("trainer")), key=lambda w: len(writers[w]))
    segments = [f for f in writers[trainer] if f.last_seq is None]
    assert len(segments) >= 3
    victim = segments[len(segments) // 2]
    victim.path.unlink()
    (result,) = verify(run_dir, select=["FT001"]).results
    (hole,) = result.violations
    assert hole.message.startswith(f"hole in writer {trainer}: events {victim.first_seq}..")


def test_four_processes_ten_thousand_events(tmp_path: Path) -> None:
    _run(tmp_path / "run", 4, 10_000)
    _check(tmp_path / "run", 4, 10_000)
    _delete_one_segment_and_expect_its_hole(tmp_path / "run")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sixteen_processes_one_hundred_thousand_events(tmp_path: Path) -> None:
    seconds = _run(tmp_path / "run", 16, 100_000)
    _check(tmp_path / "run", 16, 100_000)
    print(f"16 x 100,000 events written in {seconds:.1f} s")
    _delete_one_segment_and_expect_its_hole(tmp_path / "run")
