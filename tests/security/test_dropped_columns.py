"""A payload column missing outright is read as an older layout only when the segment's
schema version is older than the field (``eventlog/layouts.py``).

A missing column used to be taken as an older segment's whatever the segment's version,
so the model's default replaced what a damaged or forged segment held. The runs here are
written by the real writer with the columns left out as it seals each segment, so digests,
chain and checkpoint heads all hold: only the footer check can tell.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import ftaudit.eventlog.writer as writer
from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog import (
    ChecksumWhen,
    Metric,
    RunLog,
    Trainer,
    TrainerWeightChecksum,
    WriterOptions,
    scan_run,
)
from ftaudit.eventlog.compact import compact_run
from ftaudit.eventlog.events import SCHEMA_VERSION
from ftaudit.eventlog.layouts import FIELDS_ADDED
from ftaudit.eventlog.segment import SegmentMeta
from ftaudit.eventlog.segment_table import build_table
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import dropped_column, load_segment, segments
from tests.support.runs import write_run

OPTIONS = WriterOptions(fsync=False, flush_interval_s=3600)
LATER = ("trainer_weight_checksum.replica_local", "sample_advantage_summary.pure_advantage_loss")
"""Fields added while version 1 was current: a version-1 segment may lack them."""


@pytest.fixture
def sealed_without(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """Make the writer seal segments without ``drop`` columns, as schema version ``version``."""
    plan: dict[str, object] = {"drop": (), "version": SCHEMA_VERSION}

    def build(*args: object, **kwargs: object) -> tuple[pa.Table, SegmentMeta]:
        table, meta = build_table(*args, **kwargs)  # type: ignore[arg-type]
        table = table.drop_columns([c for c in plan["drop"] if c in table.column_names])  # type: ignore[attr-defined]
        meta = dataclasses.replace(meta, schema_version=plan["version"])
        return table.replace_schema_metadata(meta.to_metadata()), meta

    monkeypatch.setattr(writer, "build_table", build)
    yield plan


def _verdict(ftaudit: Invoke, run: Path) -> dict[str, object]:
    """The JSON report without what differs between two copies of a run (path, timings)."""
    result = ftaudit("verify", run, "--format", "json")
    check_exit(result, 0)
    report = json.loads(result.stdout)
    del report["run_dir"]
    for rule in report["results"]:
        del rule["seconds"]
    return report


def test_the_later_fields_are_the_recorded_ones() -> None:
    recorded = {f"{t}.{f}" for t, fields in FIELDS_ADDED.items() for f in fields}
    assert set(LATER) <= recorded


def test_an_older_segment_without_a_later_field_still_verifies(
    ftaudit: Invoke, good_run: Path, sealed_without: dict[str, object], tmp_path: Path
) -> None:
    sealed_without.update(drop=LATER, version=1)
    run = write_run(tmp_path / "run")
    held = {c for seg in segments(run) for c in load_segment(seg)[0].column_names}
    assert not held & set(LATER)  # the columns really are missing
    assert _verdict(ftaudit, run) == _verdict(ftaudit, good_run)


@pytest.mark.parametrize(
    ("version", "drop"),
    [
        (SCHEMA_VERSION, LATER[:1]),  # a field every current segment holds
        (1, ("trainer_weight_checksum.hashes",)),  # a field version 1 always had
    ],
)
def test_a_segment_without_a_column_of_its_version_is_refused(
    ftaudit: Invoke,
    sealed_without: dict[str, object],
    tmp_path: Path,
    version: int,
    drop: tuple[str, ...],
) -> None:
    sealed_without.update(drop=drop, version=version)
    run = write_run(tmp_path / "run")
    # the read check itself, without digests: the chain holds (the writer sealed it so)
    with pytest.raises(CorruptSegmentError, match=f"column '{drop[0]}' is missing") as err:
        scan_run(run)
    assert "/events/" in str(err.value) and ".parquet: " in str(err.value)
    result = ftaudit("verify", run)
    check_exit(result, 2)
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"column '{drop[0]}' is missing" in result.stderr, result.stderr
    assert f"schema version {version}" in result.stderr, result.stderr


def test_a_column_dropped_from_a_sealed_segment_is_refused(
    ftaudit: Invoke, good_run: Path, tmp_path: Path
) -> None:
    """The fuzz corpus's kind: drop a payload column with pyarrow, digest recomputed."""
    import random
    import shutil

    run = tmp_path / "run"
    shutil.copytree(good_run, run)
    what = dropped_column(run, random.Random(0))
    result = ftaudit("verify", run)
    check_exit(result, 2)
    assert "is missing, but segments of schema version" in result.stderr, (what, result.stderr)


def test_a_compacted_segment_keeps_its_oldest_layout(
    sealed_without: dict[str, object], tmp_path: Path
) -> None:
    """Merged, a version-1 original lacking a later column and a version-2 original that
    holds none of its type make one segment: its version is the oldest original's, so the
    missing column stays an older layout's, not a damaged one's."""
    sealed_without.update(drop=LATER, version=1)
    run = RunLog.start(tmp_path / "run", buffer_size=8, options=OPTIONS)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    after = ChecksumWhen.AFTER_STEP
    trainer.log(TrainerWeightChecksum(step=0, when=after, cell=0, rank=0, hashes={"w": "aa"}))
    trainer.flush()
    sealed_without.update(drop=(), version=SCHEMA_VERSION)
    trainer.log(Metric(step=0, attempt=0, values={"loss": 1.0}))
    trainer.flush()
    trainer.close()
    run.close()
    compact_run(run.run_dir, target_rows=1_000)
    (merged,) = [s for s in scan_run(run.run_dir).segments if s.meta.parts]
    assert merged.meta.schema_version == 1
    assert LATER[0] not in merged.schema.names
