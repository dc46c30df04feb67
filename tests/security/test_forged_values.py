"""Forged, well-formed values are refused on read: exit 2 naming the segment and the field.

An id range of length 10^12 made a rule allocate terabytes (MemoryError), and start and
length lists of different lengths raised a ValidationError: both exited 2 as "internal
error". The forger here also recomputes the segment's digest, so only validation can
tell.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import (
    FORGED_RUNS,
    ID_SETS,
    forge_digest,
    forge_id_set,
    load_segment,
    segments,
)

FAST = {("witness_allocated.witness_ids", k) for k in FORGED_RUNS} | {
    ("witness_snapshot.nonzero_ids", "huge")
}
WHY = {
    "huge": ("beyond the ring", "does not hold num_ids values"),
    "mismatched": ("starts and lengths differ in length",),
    "negative": ("a negative start",),
    "empty_run": ("a run length is not positive",),
}


def _copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run, target)
    return target


def _one_line_naming(result: object, field: str, why: tuple[str, ...]) -> str:
    err = result.stderr  # type: ignore[attr-defined]
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert "internal error" not in err, err
    assert "/events/" in err and ".parquet: " in err, err  # the segment
    assert f"field '{field}'" in err, err
    assert any(w in err for w in why), err
    return err


@pytest.mark.parametrize(
    ("column", "kind"),
    [
        pytest.param(c, k, marks=() if (c, k) in FAST else pytest.mark.slow)
        for c in ID_SETS
        for k in sorted(FORGED_RUNS)
    ],
)
def test_forged_id_sets_are_refused_naming_segment_and_field(
    ftaudit: Invoke, good_run: Path, tmp_path: Path, column: str, kind: str
) -> None:
    run = _copy(good_run, tmp_path)
    forge_id_set(run, random.Random(0), column, FORGED_RUNS[kind])
    result = ftaudit("verify", run)
    check_exit(result, 2)
    _one_line_naming(result, column.split(".", 1)[1], WHY[kind])


def test_a_required_field_forged_to_null(ftaudit: Invoke, good_run: Path, tmp_path: Path) -> None:
    run = _copy(good_run, tmp_path)
    column = "witness_allocated.num_ids"
    for seg in segments(run):
        table, meta = load_segment(seg)
        if column in table.column_names:
            i = table.schema.get_field_index(column)
            nulls = pa.nulls(table.num_rows, table.schema.field(i).type)
            forge_digest(seg, table.set_column(i, table.schema.field(i), nulls), meta)
            break
    result = ftaudit("verify", run)
    check_exit(result, 2)
    _one_line_naming(result, "num_ids", ("is NULL, but it is required",))


def test_an_honest_run_passes_validation(ftaudit: Invoke, good_run: Path) -> None:
    check_exit(ftaudit("verify", good_run), 0)


def _rank_outcome(cells: list) -> list:
    (cell, outcome), *rest = cells
    return [(cell, {**outcome, "ranks": ["rolled_back"]}), *rest]


@pytest.mark.parametrize(
    ("column", "forge", "field", "what"),
    [
        ("step_end.cells", _rank_outcome, "cells", "unknown RankOutcome"),
        ("attempt_end.cells", _rank_outcome, "cells", "unknown RankOutcome"),
        ("trainer_weight_checksum.when", lambda _: "before_step", "when", "unknown ChecksumWhen"),
        ("run_finished.status", lambda _: "paused", "status", "unknown RunStatus"),
        ("source_kind", lambda _: "scheduler", "source_kind", "not a known writer kind"),
    ],
)
def test_an_unknown_enum_value_is_refused_naming_segment_and_field(
    ftaudit: Invoke, good_run: Path, tmp_path: Path, column: str, forge: Any, field: str, what: str
) -> None:
    """An enum value no model knows (at any depth: a rank outcome inside a step's cells)
    is refused on read like any forged value, not where a rule first trips over it."""
    run = _copy(good_run, tmp_path)
    seg = next(s for s in segments(run) if column in load_segment(s)[0].column_names)
    table, meta = load_segment(seg)
    i = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    row = next(r for r, v in enumerate(values) if v is not None)
    values[row] = forge(values[row])
    field_type = table.schema.field(i)
    forge_digest(seg, table.set_column(i, field_type, pa.array(values, field_type.type)), meta)
    result = ftaudit("verify", run)
    check_exit(result, 2)
    err = _one_line_naming(result, field, (what,))
    assert seg.name in err, err


@pytest.mark.parametrize("hidden", ["checkpoint_saved", "witness_allocated", "step_end"])
def test_a_footer_that_leaves_out_a_type_its_rows_hold_is_refused(
    ftaudit: Invoke, good_run: Path, tmp_path: Path, hidden: str
) -> None:
    """Footer-only readers (an incremental window's choice of declarations, the MAC check's
    records, the payload columns' type checks) trust a segment's list of types: a forger who
    leaves one out and recomputes the digest is refused by every read of the rows."""
    run = _copy(good_run, tmp_path)
    seg = next(s for s in segments(run) if hidden in load_segment(s)[1][b"ftaudit.types"].decode())
    table, meta = load_segment(seg)
    listed = meta[b"ftaudit.types"].decode().split(",")
    meta[b"ftaudit.types"] = ",".join(t for t in listed if t != hidden).encode()
    forge_digest(seg, table, meta)
    for args in (("verify", run), ("verify", run, "--since-step", "0")):
        result = ftaudit(*args)
        check_exit(result, 2)
        err = result.stderr
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert seg.name in err and f"rows of type '{hidden}'" in err, err
        assert "does not list" in err, err


def test_a_row_of_no_event_type_is_refused(ftaudit: Invoke, good_run: Path, tmp_path: Path) -> None:
    """Each event type's rows load into its own table: a row whose type is NULL belongs
    to none, and is refused naming its segment, not dropped (a full load and a
    follower's window alike)."""
    run = _copy(good_run, tmp_path)
    seg = next(
        s for s in segments(run) if "step_end" in load_segment(s)[1][b"ftaudit.types"].decode()
    )
    table, meta = load_segment(seg)
    i = table.schema.get_field_index("type")
    values = table.column("type").to_pylist()
    values[len(values) // 2] = None
    nullable = pa.field("type", pa.string(), nullable=True)
    forge_digest(seg, table.set_column(i, nullable, pa.array(values, pa.string())), meta)
    for args in (("verify", run), ("verify", run, "--since-step", "0")):
        result = ftaudit(*args)
        check_exit(result, 2)
        err = result.stderr
        assert err.count("\n") == 1 and err.startswith("error: "), err
        assert seg.name in err and "a row with no event type" in err, err
