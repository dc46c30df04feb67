"""The hash chain: FT001 detects an event edited, removed, reordered or inserted.

Each segment's footer holds the SHA-256 of the file (its own digest zeroed) and the digest
of the writer's previous segment; a checkpoint records each writer's chain head. A naive
edit breaks the segment's digest; a forger who recomputes it breaks the link to the next
segment, or the head a checkpoint recorded. What no keyless chain can protect (the tip
after the last checkpoint, against a forger) is shown as such.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ftaudit.eventlog import CheckpointSaved, Metric, RunLog, Trainer, WriterOptions, read_records
from ftaudit.eventlog.segment import DIGEST_KEY, DIGEST_PLACEHOLDER, file_digest, write_atomically
from ftaudit.verifier import verify

OPTIONS = WriterOptions(fsync=False, flush_interval_s=3600)
SEGMENTS_BEFORE_CHECKPOINT = 3
SEGMENTS_AFTER_CHECKPOINT = 2


def _write(run_dir: Path) -> Path:
    """A trainer writes five segments of ten metrics; a checkpoint after the third."""
    run = RunLog.start(run_dir, buffer_size=8, options=OPTIONS)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in range(SEGMENTS_BEFORE_CHECKPOINT + SEGMENTS_AFTER_CHECKPOINT):
        for i in range(10):
            trainer.log(Metric(step=step, attempt=0, values={"loss": step + i / 10}))
        trainer.flush()
        if step == SEGMENTS_BEFORE_CHECKPOINT - 1:
            run.record_checkpoint(step)
    run.finish()
    return sorted((run_dir / "events").glob("trainer-*/*.parquet"))[0].parent


@pytest.fixture
def trainer(tmp_path: Path) -> Path:
    """The trainer's writer folder of a clean run (FT001 holds)."""
    folder = _write(tmp_path / "run")
    assert _ft001(folder) == []
    return folder


def _ft001(folder: Path) -> list[str]:
    (result,) = verify(folder.parent.parent, select=["FT001"]).results
    return [v.message for v in result.violations]


def _segment(folder: Path, index: int) -> Path:
    return sorted(folder.glob("*.parquet"))[index]


def _rewrite(
    seg: Path,
    table: pa.Table,
    *,
    forge: bool,
    last_seq: int | None = None,
    name: Path | None = None,
) -> None:
    """Write ``table`` over ``seg`` with its footer; ``forge`` recomputes the digest."""
    meta = dict(pq.read_metadata(seg).metadata or {})
    if last_seq is not None:
        meta[b"ftaudit.last_seq"] = str(last_seq).encode()
    target = name or seg
    if forge:
        meta[DIGEST_KEY.encode()] = DIGEST_PLACEHOLDER.encode()
        write_atomically(table.replace_schema_metadata(meta), target, fsync=False)
    else:
        pq.write_table(table.replace_schema_metadata(meta), target, compression="zstd")


def _edit_value(table: pa.Table, row: int) -> pa.Table:
    i = table.schema.get_field_index("metric.values")
    values = table.column(i).to_pylist()
    values[row] = [("loss", -1.0)]
    return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))


def _set_seq(table: pa.Table, seqs: list[int]) -> pa.Table:
    i = table.schema.get_field_index("seq")
    return table.set_column(i, table.schema.field(i), pa.array(seqs, pa.int64()))


def test_the_checkpoint_records_each_writers_chain_head(trainer: Path) -> None:
    (checkpoint,) = [
        r for r in read_records(trainer.parent.parent) if r.event.type == "checkpoint_saved"
    ]
    event = checkpoint.event
    assert isinstance(event, CheckpointSaved)
    last = _segment(trainer, SEGMENTS_BEFORE_CHECKPOINT - 1)
    assert event.writers[trainer.name] == 29
    assert event.chain_heads[trainer.name] == file_digest(last.read_bytes())
    segments = sorted(trainer.glob("*.parquet"))
    for earlier, later in itertools.pairwise(segments):
        linked = pq.read_metadata(later).metadata[b"ftaudit.prev_digest"].decode()
        assert linked == file_digest(earlier.read_bytes())


def test_an_edited_event(trainer: Path) -> None:
    seg = _segment(trainer, 1)
    _rewrite(seg, _edit_value(pq.read_table(seg), 4), forge=False)
    (problem,) = _ft001(trainer)
    assert f"segment {seg.name} of writer {trainer.name} was altered after it was sealed" in problem


def test_an_edited_event_with_a_forged_digest_breaks_the_chain(trainer: Path) -> None:
    seg = _segment(trainer, 3)  # after the checkpoint: only the next segment vouches for it
    _rewrite(seg, _edit_value(pq.read_table(seg), 0), forge=True)
    (problem,) = _ft001(trainer)
    after = _segment(trainer, 4)
    assert f"hash chain broken in writer {trainer.name}: segment {after.name}" in problem
    assert f"does not follow {seg.name}" in problem


def test_a_forged_edit_before_the_checkpoint_contradicts_it(trainer: Path) -> None:
    seg = _segment(trainer, SEGMENTS_BEFORE_CHECKPOINT - 1)
    _rewrite(seg, _edit_value(pq.read_table(seg), 9), forge=True)
    problems = _ft001(trainer)
    assert any("differ from what checkpoint 2 recorded" in p for p in problems), problems
    assert any("hash chain broken" in p for p in problems), problems


def test_a_removed_event(trainer: Path) -> None:
    seg = _segment(trainer, 1)  # seq 10..19 loses seq 15; footer and digest forged to match
    table = pq.read_table(seg)
    kept = table.filter(pc.not_equal(table.column("seq"), 15))
    _rewrite(seg, _set_seq(kept, list(range(10, 19))), forge=True, last_seq=18)
    problems = _ft001(trainer)
    assert any("duplicate" in p or "hole" in p or "chain" in p for p in problems), problems
    assert problems


def test_reordered_events(trainer: Path) -> None:
    seg = _segment(trainer, 0)
    seqs = list(range(10))
    seqs[2], seqs[7] = seqs[7], seqs[2]
    _rewrite(seg, _set_seq(pq.read_table(seg), seqs), forge=False)
    (problem,) = _ft001(trainer)
    assert "was altered after it was sealed" in problem


def test_reordered_events_with_a_forged_digest(trainer: Path) -> None:
    seg = _segment(trainer, 0)
    seqs = list(range(10))
    seqs[2], seqs[7] = seqs[7], seqs[2]
    _rewrite(seg, _set_seq(pq.read_table(seg), seqs), forge=True)
    (problem,) = _ft001(trainer)
    assert f"segment {_segment(trainer, 1).name} does not follow {seg.name}" in problem


def test_an_inserted_event(trainer: Path) -> None:
    seg = _segment(trainer, 1)
    table = pq.read_table(seg)
    grown = _set_seq(pa.concat_tables([table, table.slice(3, 1)]), list(range(10, 21)))
    _rewrite(seg, grown, forge=True, last_seq=20)
    problems = _ft001(trainer)
    assert any("duplicate events" in p for p in problems), problems


def test_an_inserted_segment(trainer: Path) -> None:
    """A forged segment slipped between two real ones: seq 20..29 replaced by 20..24 + 25..29."""
    seg = _segment(trainer, 2)
    table = pq.read_table(seg)
    meta = dict(pq.read_metadata(seg).metadata or {})
    _rewrite(seg, table.slice(0, 5), forge=True, last_seq=24)
    second = seg.with_name("000000000025.parquet")
    meta[b"ftaudit.first_seq"] = b"25"
    meta[DIGEST_KEY.encode()] = DIGEST_PLACEHOLDER.encode()
    write_atomically(table.slice(5).replace_schema_metadata(meta), second, fsync=False)
    problems = _ft001(trainer)
    assert any("chain" in p or "checkpoint" in p for p in problems), problems


def test_the_tip_of_a_finished_run_is_vouched_for_by_run_finished(trainer: Path) -> None:
    """``run_finished`` records every writer's final head: a forged edit of the tip after
    the last checkpoint contradicts it."""
    seg = _segment(trainer, -1)
    _rewrite(seg, _edit_value(pq.read_table(seg), 1), forge=True)
    assert any("run_finished of incarnation 0 recorded" in m for m in _ft001(trainer))


def test_the_tip_of_an_unfinished_run_is_not_protected_against_a_forger(
    tmp_path: Path,
) -> None:
    """The limit of a keyless chain: in a run that never finished (a crash), nothing after a
    writer's last segment vouches for it. A naive edit is still caught by the digest; a
    forger who recomputes it is not (see docs/reliability.md: ``ftaudit seal`` anchors the
    final heads outside the run, ``--require-finished`` refuses an unfinished run)."""
    run = RunLog.start(tmp_path / "run", buffer_size=8, options=OPTIONS)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in range(3):
        trainer.log(Metric(step=step, attempt=0, values={"loss": 1.0}))
        trainer.flush()
        if step == 1:
            run.record_checkpoint(step)
    folder = sorted((tmp_path / "run" / "events").glob("trainer-*/*.parquet"))[0].parent
    seg = _segment(folder, -1)
    _rewrite(seg, _edit_value(pq.read_table(seg), 0), forge=False)
    assert len(_ft001(folder)) == 1
    _rewrite(seg, _edit_value(pq.read_table(seg), 0), forge=True)
    assert _ft001(folder) == []


def test_a_run_written_before_the_chain_gets_one_warning(trainer: Path) -> None:
    """Neither digests nor chain heads (an ftaudit older than the chain): one warning. With
    chain heads left in the checkpoints it is a downgrade (tests/security/test_downgrade.py)."""
    for seg in (trainer.parent).glob("*/*.parquet"):
        meta = dict(pq.read_metadata(seg).metadata or {})
        for key in (DIGEST_KEY, "ftaudit.prev_digest", "ftaudit.dropped"):
            meta.pop(key.encode(), None)
        meta[b"ftaudit.schema_version"] = b"1"  # the heads' columns came later in version 1
        table = pq.read_table(seg)
        heads = ["checkpoint_saved.chain_heads", "checkpoint_saved.job_heads"]
        heads.append("run_finished.final_heads")
        table = table.drop_columns([c for c in heads if c in table.column_names])
        pq.write_table(table.replace_schema_metadata(meta), seg)
    (result,) = verify(trainer.parent.parent, select=["FT001"]).results
    (warning,) = result.violations
    assert warning.severity.value == "warning" and "no segment" in warning.message


def test_ft_verify_exits_1_on_tampering(trainer: Path) -> None:
    seg = _segment(trainer, 1)
    _rewrite(seg, _edit_value(pq.read_table(seg), 4), forge=False)
    done = subprocess.run(
        [Path(sys.executable).with_name("ft-verify"), trainer.parent.parent, "--rule", "FT001"],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode == 1, done
    assert "was altered after it was sealed" in done.stdout
