"""``ftaudit compact``: fewer segments, the same events, the same verdict, the evidence kept."""

from __future__ import annotations

import json
import random
import shutil
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftaudit.eventlog.compact import compact_run
from ftaudit.eventlog.reader import SegmentInfo, superseded
from ftaudit.eventlog.segment import PARTS_KEY, Part, SegmentMeta
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import forge_digest
from tests.support.small_segments import (
    events as _events,
)
from tests.support.small_segments import (
    segment_files as _segments,
)
from tests.support.small_segments import (
    verdict as _verdict,
)
from tests.support.small_segments import (
    write_small_segments,
)

KEY = b"compaction key"


def test_compaction_keeps_events_and_verdict(ftaudit: Invoke, tmp_path: Path) -> None:
    run = write_small_segments(tmp_path / "run")
    before, verdict = _events(run), _verdict(ftaudit, run)
    count = len(_segments(run))
    result = ftaudit("compact", run, "--target-rows", "10")
    check_exit(result, 0)
    assert f"{count} segments ->" in result.stderr
    assert len(_segments(run)) < count / 3
    assert any(PARTS_KEY.encode() in (pq.read_metadata(s).metadata or {}) for s in _segments(run))
    assert _events(run) == before
    assert _verdict(ftaudit, run) == verdict == (0, [])
    check_exit(ftaudit("compact", run), 0)  # again, into one segment per writer
    assert len(_segments(run)) == 2 and _events(run) == before
    assert _verdict(ftaudit, run) == verdict


def test_a_forgery_inside_a_compacted_segment_is_still_caught(
    ftaudit: Invoke, tmp_path: Path
) -> None:
    """The heads the checkpoints named are checked against the originals' digests."""
    run = write_small_segments(tmp_path / "run")
    compact_run(run, target_rows=10)
    trainer = next(p for p in (run / "events").iterdir() if p.name.startswith("trainer"))
    seg = min(trainer.glob("*.parquet"))
    meta = pq.read_metadata(seg).metadata or {}
    parts = json.loads(meta[PARTS_KEY.encode()])
    parts[0][2] = "f" * 64  # a forger re-digests an original: its recorded head no longer holds
    forge_digest(seg, pq.read_table(seg), {**meta, PARTS_KEY.encode(): json.dumps(parts).encode()})
    code, found = _verdict(ftaudit, run, "--rule", "FT001")
    assert code == 1 and ("FT001", "broken_chain") in found, found


def test_a_damaged_run_is_not_compacted(ftaudit: Invoke, tmp_path: Path) -> None:
    run = write_small_segments(tmp_path / "run")
    seg = _segments(run)[3]
    data = bytearray(seg.read_bytes())
    data[10] ^= 0xFF
    seg.write_bytes(bytes(data))
    listing = _segments(run)
    result = ftaudit("compact", run)
    check_exit(result, 2)
    assert str(seg) in result.stderr and "digest" in result.stderr
    assert _segments(run) == listing


def test_a_keyed_run_needs_its_key_and_keeps_its_macs(
    ftaudit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = write_small_segments(tmp_path / "run", key=KEY)
    result = ftaudit("compact", run)
    check_exit(result, 2)
    assert "carry MACs" in result.stderr
    monkeypatch.setenv("FTAUDIT_HMAC_KEY", KEY.decode())
    check_exit(ftaudit("compact", run, "--target-rows", "10"), 0)
    assert _verdict(ftaudit, run) == (0, [])
    other = tmp_path / "other"
    other.write_text("another key\n")
    code, found = _verdict(ftaudit, run, "--key-file", str(other))
    assert code == 1 and {k for _, k in found} == {"bad_mac"}, found


def test_leftovers_of_a_cut_short_compaction_are_read_once(ftaudit: Invoke, tmp_path: Path) -> None:
    """The merged segment is in place, the other originals not yet removed."""
    run = write_small_segments(tmp_path / "run")
    before = _events(run)
    saved = tmp_path / "saved"
    shutil.copytree(run / "events", saved)
    compact_run(run, target_rows=10)
    for old in saved.glob("*/*.parquet"):  # put the removed originals back
        target = run / "events" / old.parent.name / old.name
        if not target.exists():
            shutil.copy(old, target)
    assert _events(run) == before
    assert _verdict(ftaudit, run) == (0, [])
    result = ftaudit("compact", run, "--target-rows", "10")
    check_exit(result, 0)
    assert "left by an earlier compaction removed" in result.stderr
    assert _events(run) == before


@pytest.mark.parametrize("seed", range(20))
def test_superseded_is_every_segment_a_compacted_one_lists_as_a_part(seed: int) -> None:
    """A segment is superseded exactly when a compacted segment of its writer lists its
    range and digest as a part: random writers, compacted segments whose parts tile their
    ranges (as their footers are checked to), and singles that match a part, match its
    range with another digest, lie in a compacted range or past every one."""
    rng = random.Random(seed)
    infos: list[SegmentInfo] = []
    parts_of: set[tuple[str, int, int, str]] = set()

    def info(
        writer: str, first: int, last: int, digest: str, parts: tuple[Part, ...] = ()
    ) -> SegmentInfo:
        meta = SegmentMeta(1, "r", writer, 0, first, last, ("x",), digest=digest, parts=parts)
        name = f"{writer}/{first}-{last}-{digest}-{len(parts)}"
        return SegmentInfo(Path(name), meta, last - first + 1, pa.schema([]))

    for writer in ("a", "b", "c"):
        at = 0
        for _ in range(rng.randrange(0, 4)):
            cuts = sorted(rng.sample(range(at + 1, at + 40), rng.randrange(1, 6)))
            bounds = [at, *cuts]
            parts = tuple(
                Part(s, e - 1, f"d{writer}{s}", "") for s, e in pairwise([*bounds, at + 40])
            )
            parts_of.update((writer, p.first_seq, p.last_seq, p.digest) for p in parts)
            infos.append(info(writer, at, at + 39, f"c{writer}{at}", parts))
            for p in rng.sample(parts, rng.randrange(0, len(parts) + 1)):
                same = rng.random() < 0.7
                digest = p.digest if same else "other"
                infos.append(info(writer, p.first_seq, p.last_seq, digest))
            at += 40 + rng.randrange(0, 5)
        infos += [info(writer, s, s, f"f{writer}{s}") for s in range(at, at + 3)]
    rng.shuffle(infos)
    want = {
        i.path
        for i in infos
        if not i.meta.parts
        and (i.meta.writer, i.meta.first_seq, i.meta.last_seq, i.meta.digest) in parts_of
    }
    assert superseded(tuple(infos)) == want
