"""Compaction: a writer's many small segments merged into few large ones, crash-safe.

The hooks flush every step per writer, so long runs hold many small segments and the
verifier pays per file (writers roll theirs as they go, :mod:`ftaudit.eventlog.roll`;
what a crash or a clean close left unrolled is still small). :func:`compact_run` merges
each writer's consecutive segments into merged segments of up to ``target_rows`` events
(:mod:`ftaudit.eventlog.merge`: the footer keeps every original's range, digest, chain
link and MAC, which the verifier checks).

Before merging, every original is checked (digest, chain link, MAC with the key): a
damaged or forged log is refused, never laundered into a fresh digest. A keyed run
needs its key (the compacted segment gets a MAC of its own).

Crash safety: the merged segment is synced in ``RUN_DIR/compacting/``, renamed into the
writer's folder under its range name (atomic), then the originals are removed. A kill in
between leaves originals that the merged segment holds: the listing skips them
(``rundir.covered``) and the next compaction removes them. At every point each event is
read exactly once.
"""

from __future__ import annotations

import itertools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.errors import CompactError
from ftaudit.eventlog.atomic import fsync_dir
from ftaudit.eventlog.keys import same, segment_mac
from ftaudit.eventlog.merge import Original, merged, write_merged
from ftaudit.eventlog.reader import UNREADABLE, SegmentInfo, check_segment, superseded
from ftaudit.eventlog.rundir import COMPACTING_DIR, list_segments
from ftaudit.eventlog.segment import file_digest

DEFAULT_TARGET_ROWS = 100_000
"""Events per compacted segment (a group never spans a sequence gap or dropped events)."""


@dataclass(frozen=True)
class CompactStats:
    """What a compaction did."""

    segments_before: int
    segments_after: int
    merged_groups: int
    leftovers_removed: int
    """Originals left by an earlier compaction cut short, removed now."""


@dataclass(frozen=True)
class _Original:
    info: SegmentInfo
    data: bytes


def compact_run(
    run_dir: str | os.PathLike[str],
    *,
    key: bytes | None = None,
    target_rows: int = DEFAULT_TARGET_ROWS,
) -> CompactStats:
    """Merge each writer's small segments; raises :class:`CompactError` naming a bad file."""
    if target_rows < 1:
        raise CompactError(f"target rows must be positive, not {target_rows}")
    listing = list_segments(run_dir)
    root = listing.run_dir
    infos = [check_segment(f) for f in listing.files]
    # held by a merged segment: by its range name, or (a compaction of an older ftaudit,
    # which renamed over the first original) by range and digest
    leftovers = set(listing.covered) | superseded(tuple(infos))
    for path in sorted(leftovers):
        path.unlink()
    for folder in {p.parent for p in leftovers}:
        fsync_dir(folder)
    infos = [i for i in infos if i.path not in leftovers]
    keyed = any(i.meta.mac for i in infos)
    if keyed and key is None:
        raise CompactError(
            f"{root}: the run's segments carry MACs: give the run's key ($FTAUDIT_HMAC_KEY, "
            "$FTAUDIT_HMAC_KEY_FILE or --key-file) so the compacted segments get theirs"
        )
    staging = root / COMPACTING_DIR
    shutil.rmtree(staging, ignore_errors=True)  # a compaction cut short before its rename
    by_writer: dict[str, list[SegmentInfo]] = {}
    for info in infos:
        by_writer.setdefault(info.meta.writer, []).append(info)
    groups = after = 0
    for _, segments in sorted(by_writer.items()):
        if not all(s.meta.digest for s in segments):
            after += len(segments)  # written before the chain: no evidence to keep, left as is
            continue
        for group in _groups(segments, target_rows):
            if len(group) > 1:
                originals = [_checked(info, key if keyed else None) for info in group]
                _check_links(originals)
                _merge(root, originals, key if keyed else None)
                groups += 1
            after += 1
    shutil.rmtree(staging, ignore_errors=True)
    return CompactStats(len(infos) + len(leftovers), after, groups, len(leftovers))


def _groups(segments: list[SegmentInfo], target_rows: int) -> list[list[SegmentInfo]]:
    """Consecutive segments up to ``target_rows`` events; a new group at every gap in the
    sequence and at every segment that follows dropped events (its hole stays visible)."""
    out: list[list[SegmentInfo]] = []
    rows = 0
    for info in segments:
        current = out[-1] if out else None
        joins = (
            current is not None
            and info.meta.first_seq == current[-1].meta.last_seq + 1
            and info.meta.dropped == 0
            and rows + info.num_rows <= target_rows
        )
        if joins and current is not None:
            current.append(info)
            rows += info.num_rows
        else:
            out.append([info])
            rows = info.num_rows
    return out


def _checked(info: SegmentInfo, key: bytes | None) -> _Original:
    """The original's bytes, after checking its digest (and MAC): no damage is merged."""
    try:
        data = info.path.read_bytes()
    except OSError as exc:
        raise CompactError(f"{info.path}: cannot read it ({exc.strerror or exc})") from None
    if file_digest(data) != info.meta.digest:
        raise CompactError(
            f"{info.path}: does not match its digest (altered or damaged): not compacting "
            "a damaged log; run ft-verify"
        )
    if key is not None:
        tags = [(info.meta.mac, info.meta.digest)] + [(p.mac, p.digest) for p in info.meta.parts]
        if not all(tag and same(tag, segment_mac(key, digest)) for tag, digest in tags):
            raise CompactError(
                f"{info.path}: its MAC is missing or does not match the key: not compacting "
                "a forged log (or the key is not the run's)"
            )
    return _Original(info, data)


def _check_links(originals: list[_Original]) -> None:
    for before, after in itertools.pairwise(originals):
        if after.info.meta.prev_digest != before.info.meta.head_digest:
            raise CompactError(
                f"{after.info.path}: does not follow {before.info.path.name} in the hash "
                "chain: not compacting a broken log; run ft-verify"
            )


def _merge(root: Path, originals: list[_Original], key: bytes | None) -> None:
    try:
        tables = [pq.read_table(pa.BufferReader(o.data)) for o in originals]
    except UNREADABLE as exc:
        raise CompactError(f"{originals[0].info.path.parent}: unreadable ({exc})") from None
    table, meta = merged(
        [Original(t, o.info.meta) for t, o in zip(tables, originals, strict=True)],
        keyed=key is not None,
    )
    write_merged(root, table, meta, key=key, fsync=True)
    for o in originals:  # held by the merged segment: the listing skips them until gone
        o.info.path.unlink()
    fsync_dir(originals[0].info.path.parent)


__all__ = ["DEFAULT_TARGET_ROWS", "CompactStats", "compact_run"]
