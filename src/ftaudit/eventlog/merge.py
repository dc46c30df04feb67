"""Merged segments: consecutive segments of one writer sealed again as one, evidence kept.

Two things merge segments: a writer rolling its own small flushes as it goes
(:mod:`ftaudit.eventlog.roll`) and ``ftaudit compact`` (:mod:`ftaudit.eventlog.compact`).
A merged segment is an ordinary sealed segment (its own digest, and MAC when the run is
keyed) whose footer also lists, as ``ftaudit.parts``, every original it holds with the
evidence the verifier needs: its sequence range, digest, chain link and MAC. The chain,
the heads that checkpoints, ``run_finished`` and seals name, and the MACs are all still
checked against them (FT001).

It is named by its range (``<first>-<last>.parquet``), never by a name a flush used, so
no file that a reader listed ever changes: the merged segment appears (built and synced
in ``RUN_DIR/compacting/``, then renamed into the writer's folder, atomic), and from then
on the listing skips the originals it holds (``rundir.covered``) until they are removed.
A crash at any point leaves every event readable exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from ftaudit.eventlog.atomic import fsync_dir
from ftaudit.eventlog.rundir import COMPACTING_DIR, segment_path
from ftaudit.eventlog.segment import DIGEST_PLACEHOLDER, Part, SegmentMeta, write_atomically


@dataclass(frozen=True)
class Original:
    """A sealed segment about to be merged: its rows and its footer (digest and MAC set)."""

    table: pa.Table
    meta: SegmentMeta


def parts_of(meta: SegmentMeta) -> tuple[Part, ...]:
    """The originals a segment stands for: its parts when merged already, else itself."""
    m = meta
    return m.parts or (Part(m.first_seq, m.last_seq, m.digest, m.prev_digest, m.mac),)


def merged(originals: Sequence[Original], *, keyed: bool) -> tuple[pa.Table, SegmentMeta]:
    """One table holding the originals' rows in order, and the footer of the merged segment.

    The originals must be consecutive segments of one writer whose chain links hold (the
    callers check that); the first's link and dropped count become the merged segment's.
    """
    first, last = originals[0].meta, originals[-1].meta
    table = pa.concat_tables(
        [o.table.replace_schema_metadata(None) for o in originals], promote_options="default"
    )
    meta = SegmentMeta(
        # the oldest layout it holds: a type only an older original holds may lack a
        # column that a newer version requires (eventlog/layouts.py)
        schema_version=min(o.meta.schema_version for o in originals),
        run_id=first.run_id,
        writer=first.writer,
        incarnation=first.incarnation,
        first_seq=first.first_seq,
        last_seq=last.last_seq,
        types=tuple(sorted({t for o in originals for t in o.meta.types})),
        prev_digest=first.prev_digest,
        dropped=first.dropped,
        mac=DIGEST_PLACEHOLDER if keyed else "",
        parts=tuple(p for o in originals for p in parts_of(o.meta)),
    )
    return table.replace_schema_metadata(meta.to_metadata()), meta


def write_merged(
    run_dir: Path, table: pa.Table, meta: SegmentMeta, *, key: bytes | None, fsync: bool
) -> Path:
    """Seal the merged segment under its range name; returns its path.

    Built in the staging folder first (a temp file there is no torn flush of the writer),
    then renamed into place: readers see it whole or not at all.
    """
    target = segment_path(run_dir, meta.writer, meta.first_seq, meta.last_seq)
    staged = run_dir / COMPACTING_DIR / meta.writer / target.name
    write_atomically(table, staged, fsync=fsync, key=key)
    os.replace(staged, target)
    if fsync:
        fsync_dir(target.parent)
    return target


__all__ = ["Original", "merged", "parts_of", "write_merged"]
