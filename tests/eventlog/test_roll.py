"""Writers roll their small segments into merged ones as they go: fewer files, the same events,
the same verdict, and FT001 still checks every original's digest, chain link and MAC."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ftaudit.eventlog import list_segments
from ftaudit.eventlog.segment import PARTS_KEY
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import forge_digest
from tests.support.small_segments import events, verdict, write_small_segments

KEY = b"rolling key"
STEPS = 22
ROLL = 4


def _trainer(run: Path) -> Path:
    return next(p for p in sorted((run / "events").iterdir()) if p.name.startswith("trainer"))


def _rolled(run: Path) -> list[Path]:
    """The trainer's merged segments (named by their range), in sequence order."""
    return sorted(p for p in _trainer(run).glob("*-*.parquet"))


def _by_role(run: Path) -> list[tuple[str, int, str]]:
    """The run's events, writers named by role; the driver's by type (its records name
    writer ids and digests, which differ from run to run)."""
    return [
        (w.split(".")[0], seq, e if w.startswith("trainer") else json.loads(e)["type"])
        for w, seq, e in events(run)
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The same steps written with rolling off and with a roll every ``ROLL`` segments."""
    base = tmp_path_factory.mktemp("roll")
    plain = write_small_segments(base / "plain", steps=STEPS)
    rolled = write_small_segments(base / "rolled", steps=STEPS, roll=ROLL)
    return plain, rolled


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


def test_rolled_segments_hold_the_same_events_in_fewer_files(
    ftaudit: Invoke, runs: tuple[Path, Path]
) -> None:
    plain, rolled = runs
    assert _by_role(rolled) == _by_role(plain)
    listed = list_segments(rolled)
    trainer = listed.writers[_trainer(rolled).name]
    # 5 rolls of 4 flushes, then the last 2 flushes rolled at the writer's clean close
    assert [(f.last_seq or f.first_seq) - f.first_seq + 1 for f in trainer] == [8] * 5 + [4]
    assert all(f.last_seq is not None for f in trainer)
    # the close removed every original, the last roll's too: only merged segments are left
    assert not listed.covered
    assert len(list(_trainer(rolled).glob("*.parquet"))) == len(trainer)
    parts = [
        json.loads((pq.read_metadata(p).metadata or {})[PARTS_KEY.encode()])
        for p in _rolled(rolled)
    ]
    assert [len(p) for p in parts] == [ROLL] * 5 + [STEPS % ROLL]
    assert verdict(ftaudit, rolled) == verdict(ftaudit, plain) == (0, [])


def test_a_keyed_writer_macs_its_rolled_segments(
    ftaudit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_small_segments(tmp_path / "run", steps=9, key=KEY, roll=ROLL)
    rolled = _rolled(run)
    assert len(rolled) == 2
    parts = json.loads((pq.read_metadata(rolled[0]).metadata or {})[PARTS_KEY.encode()])
    assert all(p[4] for p in parts)  # every original's MAC is kept
    monkeypatch.setenv("FTAUDIT_HMAC_KEY", KEY.decode())
    assert verdict(ftaudit, run) == (0, [])
    table = pq.read_table(rolled[0])  # a keyless forger re-seals a rolled segment
    meta = dict(table.schema.metadata or {})
    i = table.schema.get_field_index("ts")
    later = pc.add(table.column(i).cast(pa.int64()), 1).cast(table.schema.field(i).type)
    forge_digest(rolled[0], table.set_column(i, table.schema.field(i), later), meta)
    code, found = verdict(ftaudit, run, "--rule", "FT001")
    assert code == 1 and ("FT001", "bad_mac") in found, found


def test_an_altered_rolled_segment_is_caught(
    ftaudit: Invoke, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run = _copy(runs[1], tmp_path / "run")
    seg = _rolled(run)[1]
    parts = json.loads((pq.read_metadata(seg).metadata or {})[PARTS_KEY.encode()])
    held = parts[2][2].encode()  # an original's digest, edited in place (digest not redone)
    data = seg.read_bytes()
    seg.write_bytes(data.replace(held, held[::-1]))
    code, found = verdict(ftaudit, run, "--rule", "FT001")
    assert code == 1 and ("FT001", "altered_segment") in found, found


def test_a_reforged_original_inside_a_rolled_segment_is_caught(
    ftaudit: Invoke, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """A forger re-digests the rolled segment, and an original's digest in its parts."""
    run = _copy(runs[1], tmp_path / "run")
    seg = _rolled(run)[0]
    table = pq.read_table(seg)
    meta = dict(table.schema.metadata or {})
    parts = json.loads(meta[PARTS_KEY.encode()])
    parts[1][2] = "f" * 64
    forge_digest(seg, table, {**meta, PARTS_KEY.encode(): json.dumps(parts).encode()})
    code, found = verdict(ftaudit, run, "--rule", "FT001")
    assert code == 1 and ("FT001", "broken_chain") in found, found


def test_a_removed_rolled_segment_is_a_hole(
    ftaudit: Invoke, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run = _copy(runs[1], tmp_path / "run")
    _rolled(run)[0].unlink()  # its originals were removed at the next roll
    code, found = verdict(ftaudit, run, "--rule", "FT001")
    assert code == 1 and ("FT001", "hole") in found, found


def test_leftover_originals_are_never_read_and_compact_removes_them(
    ftaudit: Invoke, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    # a job killed after its last flush: its writers never closed, so the last roll's
    # originals are still there (a clean close removes them)
    run = write_small_segments(tmp_path / "run", steps=STEPS, roll=ROLL, finish=False)
    before, judged = events(run), verdict(ftaudit, run)
    assert judged[0] == 1 and {kind for _, kind in judged[1]} <= {"unfinished", "unvouched_tail"}, (
        judged
    )
    leftovers = list_segments(run).covered
    assert len(leftovers) == 2 * ROLL  # the last roll of the driver and of the trainer
    for path in leftovers:  # redundant copies: what they say does not count
        path.write_bytes(b"PAR1 damaged")
    assert events(run) == before and verdict(ftaudit, run) == judged
    result = ftaudit("compact", run)
    check_exit(result, 0)
    assert f"{len(leftovers)} left by an earlier compaction removed" in result.stderr
    assert not any(p.exists() for p in leftovers)
    assert events(run) == before and verdict(ftaudit, run) == judged
    assert all(len(files) == 1 for files in list_segments(run).writers.values())


def test_a_flush_renamed_as_a_merged_segment_is_refused(
    ftaudit: Invoke, runs: tuple[Path, Path], tmp_path: Path
) -> None:
    run = _copy(runs[0], tmp_path / "run")
    seg = min(_trainer(run).glob("*.parquet"))
    last = int((pq.read_metadata(seg).metadata or {})[b"ftaudit.last_seq"])
    renamed = seg.with_name(f"{seg.stem}-{last:012d}.parquet")  # its range, but no parts
    seg.rename(renamed)
    result = ftaudit("verify", run)
    check_exit(result, 2)
    assert str(renamed) in result.stderr and "lists no parts" in result.stderr
