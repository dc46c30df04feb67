"""Sealed segments: one immutable Parquet file per writer flush.

Where they live is :mod:`ftaudit.eventlog.rundir`'s business (``segment_path``).
A flush writes every buffered event of one writer into ONE file, whatever their types,
so a flush is atomic as a whole: a crash loses a whole unflushed tail, never part of one.
"""

from __future__ import annotations

import bisect
import hashlib
import json
from array import array
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.arrow_schema import to_arrow
from ftaudit.eventlog.atomic import write_bytes_atomically
from ftaudit.eventlog.events import SCHEMA_VERSION, Event
from ftaudit.eventlog.identity import Identity
from ftaudit.eventlog.keys import MAC_RECORD_TYPES, record_mac, segment_mac
from ftaudit.eventlog.record import ENVELOPE_SCHEMA
from ftaudit.eventlog.registry import EventRegistry

META_PREFIX = "ftaudit."


DIGEST_KEY = f"{META_PREFIX}digest"
MAC_KEY = f"{META_PREFIX}mac"
PARTS_KEY = f"{META_PREFIX}parts"
DIGEST_PLACEHOLDER = "0" * 64
"""The footer value the digest is computed with: a file's digest is the SHA-256 of its bytes
with its own digest value (and its MAC, when it has one) replaced by this (see
:func:`file_digest`)."""

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
class Part:
    """One original segment that ``ftaudit compact`` merged into a larger one: its
    sequence range and the chain evidence it carried (digest, link, MAC)."""

    first_seq: int
    last_seq: int
    digest: str
    prev_digest: str
    mac: str = ""

    def to_json(self) -> list:
        return [self.first_seq, self.last_seq, self.digest, self.prev_digest, self.mac]

    @classmethod
    def from_json(cls, value: list) -> Part:
        if not isinstance(value, list) or len(value) != 5:
            raise ValueError(f"malformed part {value!r}")
        first, last, digest, prev, tag = value
        if not all(isinstance(v, int) for v in (first, last)) or not all(
            isinstance(v, str) for v in (digest, prev, tag)
        ):
            raise ValueError(f"malformed part {value!r}")
        return cls(first, last, digest, prev, tag)


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
    digest: str = ""
    """SHA-256 of the whole file (its own digest value zeroed); "" in segments written before
    ftaudit recorded digests."""
    prev_digest: str = ""
    """The digest of the writer's previous segment ("" for its first): the hash chain."""
    dropped: int = 0
    """Events the writer dropped just before this segment (the disk failed for too long)."""
    mac: str = ""
    """HMAC-SHA256 of the digest with the run's key (``eventlog/keys.py``); "" when the
    writer had no key."""
    parts: tuple[Part, ...] = ()
    """A compacted segment: the original segments it holds, in order (``ftaudit.parts``);
    () for a segment a writer sealed."""

    @property
    def head_digest(self) -> str:
        """The chain head this segment ends at: its own digest, or for a compacted segment
        the last original's (what the writer chained on and the records name)."""
        return self.parts[-1].digest if self.parts else self.digest

    def to_metadata(self) -> dict[bytes, bytes]:
        values = {
            "schema_version": str(self.schema_version),
            "run_id": self.run_id,
            "writer": self.writer,
            "incarnation": str(self.incarnation),
            "first_seq": str(self.first_seq),
            "last_seq": str(self.last_seq),
            "types": ",".join(self.types),
            "digest": self.digest or DIGEST_PLACEHOLDER,
            "prev_digest": self.prev_digest,
            "dropped": str(self.dropped),
        }
        if self.mac:
            values["mac"] = self.mac
        if self.parts:
            values["parts"] = json.dumps([p.to_json() for p in self.parts], separators=(",", ":"))
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
            digest=meta.get(DIGEST_KEY, ""),
            prev_digest=meta.get(f"{META_PREFIX}prev_digest", ""),
            dropped=int(meta.get(f"{META_PREFIX}dropped", "0")),
            mac=meta.get(MAC_KEY, ""),
            parts=tuple(Part.from_json(p) for p in json.loads(meta.get(PARTS_KEY, "[]"))),
        )


def _source_columns(source: Identity, n: int) -> list[pa.Array]:
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
    source: Identity,
    registry: EventRegistry,
    prev_digest: str = "",
    dropped: int = 0,
    key: bytes | None = None,
) -> tuple[pa.Table, SegmentMeta]:
    """Arrange a flush as one table: envelope columns, then the payload columns of each type.

    Rows are grouped by type (the ``seq`` column keeps the logging order), so each type's
    payload is one dense block with nulls above and below it. With a ``key``, the records
    of :data:`~ftaudit.eventlog.keys.MAC_RECORD_TYPES` get their MAC, and the footer a MAC
    placeholder that :func:`write_atomically` fills.
    """
    n = len(batch)
    type_names = np.array(list(map(attrgetter("type"), batch.events)), dtype=object)
    order = np.argsort(type_names, kind="stable")
    names = type_names[order].tolist()
    events_sorted = list(map(batch.events.__getitem__, order.tolist()))
    if key is not None:
        events_sorted = _with_record_macs(
            events_sorted, order, key, run_id=run_id, writer=writer, first_seq=first_seq
        )
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
        prev_digest=prev_digest,
        dropped=dropped,
        mac=DIGEST_PLACEHOLDER if key is not None else "",
    )
    schema = pa.schema(fields, metadata=meta.to_metadata())
    return pa.Table.from_arrays(columns, schema=schema), meta


def _with_record_macs(
    events: list[Event], order: np.ndarray, key: bytes, *, run_id: str, writer: str, first_seq: int
) -> list[Event]:
    """``events`` (in ``order``) with a MAC on each record that vouches for heads."""
    out = list(events)
    for i, event in enumerate(events):
        if event.type in MAC_RECORD_TYPES:
            seq = first_seq + int(order[i])
            tag = record_mac(key, run_id=run_id, writer=writer, seq=seq, event=event)
            out[i] = event.model_copy(update={"mac": tag})
    return out


def _value_at(data: bytes | bytearray | memoryview, key: str) -> int:
    """Where the 64-character value of footer ``key`` sits in a segment's bytes; -1 when it
    is not there."""
    view = memoryview(data)
    if len(view) < 12 or bytes(view[-4:]) != b"PAR1":
        return -1
    footer_len = int.from_bytes(view[-8:-4], "little")
    start = len(view) - 8 - footer_len
    if start < 4:
        return -1
    name = key.encode()
    at = bytes(view[start:-8]).rfind(name)
    if at < 0:
        return -1
    at += start + len(name)
    # thrift compact protocol: the value's field header and length byte, then the value
    if at + 2 + len(DIGEST_PLACEHOLDER) > len(view) - 8 or view[at + 1] != len(DIGEST_PLACEHOLDER):
        return -1
    return at + 2


def file_digest(data: bytes | bytearray | memoryview) -> str | None:
    """SHA-256 of a segment's bytes with its own digest value (and MAC) zeroed; None without
    a digest.

    The digest covers every byte of the file (data pages, footer, every other metadata
    value), so any change to a sealed segment, a single bit included, changes it. The MAC,
    made from the digest, is the one value it cannot cover.
    """
    at = _value_at(data, DIGEST_KEY)
    if at < 0:
        return None
    slots = sorted({at, _value_at(data, MAC_KEY)} - {-1})
    view = memoryview(data)
    h = hashlib.sha256()
    done = 0
    for slot in slots:
        h.update(view[done:slot])
        h.update(DIGEST_PLACEHOLDER.encode())
        done = slot + len(DIGEST_PLACEHOLDER)
    h.update(view[done:])
    return h.hexdigest()


def write_atomically(table: pa.Table, final: Path, *, fsync: bool, key: bytes | None = None) -> str:
    """Write ``table`` so that ``final`` is either absent or complete, never half-written.

    Written through :func:`~ftaudit.eventlog.atomic.atomic_path` (temp file, fsync,
    rename, fsync of the directory; ``fsync=False`` skips the fsyncs). The file is built
    in memory first, so its digest (see :func:`file_digest`) and, with a ``key``, the MAC
    of that digest can be patched into its footer; a failed write removes its temp file.
    Returns the digest.
    """
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        compression="zstd",
        write_page_checksum=True,
        write_statistics=["seq", "step", "attempt", "type"],
    )
    data = bytearray(sink.getvalue().to_pybytes())
    at = _value_at(data, DIGEST_KEY)
    digest = file_digest(data)
    if at < 0 or digest is None:
        raise RuntimeError("segment footer lacks the digest placeholder")
    data[at : at + len(digest)] = digest.encode()
    if key is not None:
        mac_at = _value_at(data, MAC_KEY)
        if mac_at < 0:
            raise RuntimeError("segment footer lacks the MAC placeholder")
        data[mac_at : mac_at + len(digest)] = segment_mac(key, digest).encode()
    write_bytes_atomically(final, data, fsync=fsync)
    return digest
