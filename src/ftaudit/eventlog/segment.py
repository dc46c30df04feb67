"""Sealed segments: one immutable Parquet file per writer flush.

On-disk layout (see ``eventlog/README.md``)::

    RUN_DIR/events/<writer id>/<first seq, 12 digits>.parquet

A flush writes every buffered event of one writer into ONE file, whatever their types,
so a flush is atomic as a whole: a crash loses a whole unflushed tail, never part of one.
"""

from __future__ import annotations

import bisect
import os
from array import array
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
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


NO_VALUE = -1
"""Stands for None in the integer columns of a :class:`Batch` (steps are never negative)."""


@dataclass
class Batch:
    """A writer's buffered events, as columns.

    Parallel ``array('q')`` columns instead of a tuple per event: logging then creates no
    object the garbage collector tracks, so a full buffer does not make every later
    ``log`` call pay for collections that scan it.
    """

    events: list[Event] = field(default_factory=list)
    ts_us: array = field(default_factory=lambda: array("q"))
    steps: array = field(default_factory=lambda: array("q"))
    attempts: array = field(default_factory=lambda: array("q"))

    def __len__(self) -> int:
        return len(self.events)

    def extend(self, other: Batch) -> None:
        self.events += other.events
        self.ts_us += other.ts_us
        self.steps += other.steps
        self.attempts += other.attempts

    def drop_first(self, count: int) -> None:
        del self.events[:count], self.ts_us[:count], self.steps[:count], self.attempts[:count]


def _int_column(values: array, order: np.ndarray) -> pa.Array:
    column = np.frombuffer(values, dtype=np.int64)[order]
    return pa.array(column, pa.int64(), mask=column == NO_VALUE)


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
    batch: Batch,
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
    type_names = np.array(list(map(attrgetter("type"), batch.events)), dtype=object)
    order = np.argsort(type_names, kind="stable")
    names = type_names[order].tolist()
    events_sorted = list(map(batch.events.__getitem__, order.tolist()))
    columns: list[pa.Array] = [
        pa.array(names, pa.string()),
        pa.array(np.frombuffer(batch.ts_us, dtype=np.int64)[order]).cast(
            ENVELOPE_SCHEMA.field("ts").type
        ),
        pa.repeat(pa.scalar(run_id, pa.string()), n),
        pa.repeat(pa.scalar(incarnation, pa.int64()), n),
        pa.repeat(pa.scalar(writer, pa.string()), n),
        pa.array(order.astype(np.int64) + first_seq),
        _int_column(batch.steps, order),
        _int_column(batch.attempts, order),
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
