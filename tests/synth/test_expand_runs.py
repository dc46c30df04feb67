"""The ``expand_runs`` SQL macro: id sets stored as runs, expanded for ad-hoc queries."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import ftaudit
from ftaudit.cli.app import app
from ftaudit.eventlog import WitnessAllocated, WitnessSnapshot, read_records


def test_expand_runs_gives_every_id_in_stored_order(small_run_dir: Path) -> None:
    records = read_records(small_run_dir)
    snapshot = next(
        r for r in records if isinstance(r.event, WitnessSnapshot) and len(r.event.nonzero_ids)
    )
    alloc = next(r for r in records if isinstance(r.event, WitnessAllocated) and r.event.num_ids)
    with ftaudit.connect(small_run_dir) as con:
        (ids,) = con.sql(
            "SELECT expand_runs(nonzero_ids) FROM witness_snapshot WHERE writer = ? AND seq = ?",
            params=[snapshot.envelope.writer, snapshot.envelope.seq],
        ).fetchall()[0]
        samples = con.sql(
            "SELECT unnest(expand_runs(sample_indices)) AS s FROM witness_allocated "
            "WHERE writer = ? AND seq = ?",
            params=[alloc.envelope.writer, alloc.envelope.seq],
        ).fetchall()
        empty, null = con.sql(
            "SELECT expand_runs({'starts': [], 'lengths': []}::STRUCT(starts BIGINT[], "
            "lengths BIGINT[])), expand_runs(NULL::STRUCT(starts BIGINT[], lengths BIGINT[]))"
        ).fetchall()[0]
    assert isinstance(snapshot.event, WitnessSnapshot)
    assert isinstance(alloc.event, WitnessAllocated)
    assert ids == snapshot.event.nonzero_ids.to_list()
    assert [s for (s,) in samples] == alloc.event.sample_indices.to_list()
    assert empty == [] and null is None


def test_expand_runs_in_the_sql_sandbox(small_run_dir: Path) -> None:
    """Count each step's trained ids with plain SQL, as a user debugging a run would."""
    query = (
        "SELECT step, count(*) AS ids FROM (SELECT step, unnest(expand_runs(witness_ids)) "
        "FROM witness_allocated WHERE incarnation = 0 AND attempt = 0) GROUP BY step "
        "ORDER BY step LIMIT 3"
    )
    result = CliRunner().invoke(app, ["sql", str(small_run_dir), query, "--format", "json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)
    assert rows == [{"step": s, "ids": 32} for s in range(3)]
