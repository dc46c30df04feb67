"""Sealed segments: one immutable Parquet file per writer flush.

On-disk layout (see ``eventlog/README.md``)::

    RUN_DIR/events/<writer id>/<first seq, 12 digits>.parquet

A flush writes every buffered event of one writer into ONE file, whatever their types,
so a flush is atomic as a whole: a crash loses a whole unflushed tail, never part of one.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
import pyarrow.parquet as pq

from ftaudit.eventlog.arrow_schema import to_arrow
from ftaudit.eventlog.events import SCHEMA_VERSION, Event
from ftaudit.eventlog.identity import Driver, Engine, RolloutManager, Trainer
from ftaudit.eventlog.record import ENVELOPE_SCHEMA
from ftaudit.eventlog.registry import EventRegistry

EVENTS_DIR = "events"
SEGMENT_SUFFIX = ".parquet"
TEMP_PREFIX = "."
META_PREFIX = "ftaudit."

Source = Driver | RolloutManager | Trainer | Engine


Pending = tuple[Event, int, int | None, int | None]
"""One buffered event: (event, timestamp in microseconds, step, attempt). A plain tuple,
because building it is on the training loop's path."""


@dataclass(frozen=True)
class SegmentMeta:
    """What a segment's footer says about it."""

    schema_version: int
    run_id: str
    writer: str
    incarnation: int
    first_seq: int
    last_seq: int
    types: tuple[str, ...]

    def to_metadata(self) -> dict[bytes, bytes]:
        values = {
            "schema_version": str(self.schema_version),
            "run_id": self.run_id,
            "writer": self.writer,
            "incarnation": str(self.incarnation),
            "first_seq": str(self.first_seq),
            "last_seq": str(self.last_seq),
            "types": ",".join(self.types),
        }
        return {(META_PREFIX + k).encode(): v.encode() for k, v in values.items()}

    @classmethod
    def from_metadata(cls, metadata: dict[bytes, bytes] | None) -> SegmentMeta:
        """Parse a footer; raises ``KeyError`` or ``ValueError`` when it is not ours."""
        meta = {k.decode(): v.decode() for k, v in (metadata or {}).items()}
        get = lambda key: meta[META_PREFIX + key]  # noqa: E731
        return cls(
            schema_version=int(get("schema_version")),
            run_id=get("run_id"),
            writer=get("writer"),
            incarnation=int(get("incarnation")),
            first_seq=int(get("first_seq")),
            last_seq=int(get("last_seq")),
            types=tuple(t for t in get("types").split(",") if t),
        )


def segment_path(run_dir: Path, writer: str, first_seq: int) -> Path:
    return run_dir / EVENTS_DIR / writer / f"{first_seq:012d}{SEGMENT_SUFFIX}"


def _source_columns(source: Source, n: int) -> list[pa.Array]:
    role = getattr(source, "role", None)
    cell = getattr(source, "cell_index", None)
    rank = getattr(source, "rank_within_cell", None)
    engine = getattr(source, "engine_index", None)
    return [
        pa.repeat(pa.scalar(source.kind, pa.string()), n),
        pa.repeat(pa.scalar(role, pa.string()), n),
        pa.repeat(pa.scalar(cell, pa.int64()), n),
        pa.repeat(pa.scalar(rank, pa.int64()), n),
        pa.repeat(pa.scalar(engine, pa.int64()), n),
    ]


def build_table(
    batch: Sequence[Pending],
    *,
    first_seq: int,
    run_id: str,
    incarnation: int,
    writer: str,
    source: Source,
    registry: EventRegistry,
) -> tuple[pa.Table, SegmentMeta]:
    """Arrange a flush as one table: envelope columns, then the payload columns of each type.

    Rows are grouped by type (the ``seq`` column keeps the logging order), so each type's
    payload is one dense block with nulls above and below it.
    """
    n = len(batch)
    events_in_order = list(map(itemgetter(0), batch))
    type_names = list(map(attrgetter("type"), events_in_order))
    order = sorted(range(n), key=type_names.__getitem__)
    rows = list(map(batch.__getitem__, order))
    events_sorted = list(map(itemgetter(0), rows))
    names = list(map(type_names.__getitem__, order))
    columns: list[pa.Array] = [
        pa.array(names, pa.string()),
        pa.array(list(map(itemgetter(1), rows)), pa.int64()).cast(ENVELOPE_SCHEMA.field("ts").type),
        pa.repeat(pa.scalar(run_id, pa.string()), n),
        pa.repeat(pa.scalar(incarnation, pa.int64()), n),
        pa.repeat(pa.scalar(writer, pa.string()), n),
        pa.compute.add(pa.array(order, pa.int64()), first_seq),
        pa.array(list(map(itemgetter(2), rows)), pa.int64()),
        pa.array(list(map(itemgetter(3), rows)), pa.int64()),
        *_source_columns(source, n),
    ]
    fields = list(ENVELOPE_SCHEMA)
    types: list[str] = []
    start = 0
    while start < n:
        name = names[start]
        end = bisect.bisect_right(names, name, lo=start)
        event_type = registry[name]
        events = events_sorted[start:end]
        for (field_name, annotation), arrow_field in zip(
            event_type.fields, event_type.arrow_fields, strict=True
        ):
            dense = to_arrow(list(map(attrgetter(field_name), events)), annotation)
            columns.append(
                pa.concat_arrays(
                    [pa.nulls(start, dense.type), dense, pa.nulls(n - end, dense.type)]
                )
            )
            fields.append(arrow_field)
        types.append(name)
        start = end
    meta = SegmentMeta(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        writer=writer,
        incarnation=incarnation,
        first_seq=first_seq,
        last_seq=first_seq + n - 1,
        types=tuple(types),
    )
    schema = pa.schema(fields, metadata=meta.to_metadata())
    return pa.Table.from_arrays(columns, schema=schema), meta


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(table: pa.Table, final: Path, *, fsync: bool) -> None:
    """Write ``table`` so that ``final`` is either absent or complete, never half-written.

    Temp file in the same directory, fsync, rename, fsync of the directory. With
    ``fsync=False`` the rename still hides partial files from readers, but a machine
    crash (not a process crash) may lose recent segments.
    """
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{TEMP_PREFIX}{final.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        pq.write_table(
            table,
            f,
            compression="zstd",
            write_page_checksum=True,
            write_statistics=["seq", "step", "attempt", "type"],
        )
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, final)
    if fsync:
        fsync_dir(final.parent)
