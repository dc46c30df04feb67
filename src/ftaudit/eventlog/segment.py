"""Sealed segments: one immutable Parquet file per writer flush.

Where they live is :mod:`ftaudit.eventlog.rundir`'s business (``segment_path``).
A flush writes every buffered event of one writer into ONE file, whatever their types,
so a flush is atomic as a whole: a crash loses a whole unflushed tail, never part of one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.arrays import consecutive_repeats, constant_strings, int64_numpy
from ftaudit.eventlog.arrow_schema import pairs_to_arrow, to_arrow
from ftaudit.eventlog.events import SCHEMA_VERSION, Event
from ftaudit.eventlog.identity import Identity
from ftaudit.eventlog.keys import MAC_RECORD_TYPES, record_mac, segment_mac
from ftaudit.eventlog.record import ENVELOPE_SCHEMA
from ftaudit.eventlog.registry import EventRegistry

if TYPE_CHECKING:  # the writer's side: a verifier reading footers never imports it
    from ftaudit.eventlog.batch import Batch, Rows
    from ftaudit.eventlog.context import StepAttempt

META_PREFIX = "ftaudit."


DIGEST_KEY = f"{META_PREFIX}digest"
MAC_KEY = f"{META_PREFIX}mac"
PARTS_KEY = f"{META_PREFIX}parts"
DIGEST_PLACEHOLDER = "0" * 64
"""The footer value the digest is computed with: a file's digest is the SHA-256 of its bytes
with its own digest value (and its MAC, when it has one) replaced by this (see
:func:`file_digest`)."""


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


FieldValues = Mapping[str, Any]
"""One event's field values by name, as its model holds them (``vars(event)``)."""


@dataclass(frozen=True)
class _Block:
    """One event type's rows of a flush, in sequence order: envelope values and the dense
    payload columns."""

    seqs: np.ndarray
    ts_ns: np.ndarray
    step: pa.Array
    attempt: pa.Array
    payload: list[pa.Array]

    def __len__(self) -> int:
        return len(self.seqs)


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
    payload is one dense block with nulls above and below it. Events logged as objects
    are read once from their attribute dicts, events logged as field values
    (``Batch.rows``) straight from their tuples, and each column is handed to Arrow's
    converters whole: no ``model_dump``, no per-event Python code. With a ``key``, the
    records of :data:`~ftaudit.eventlog.keys.MAC_RECORD_TYPES` get their MAC, and the
    footer a MAC placeholder that :func:`write_atomically` fills.
    """
    n = len(batch)
    blocks: dict[str, list[_Block]] = {}
    if batch.events:
        objects = _object_blocks(
            batch, registry, key, run_id=run_id, writer=writer, first_seq=first_seq
        )
        for name, block in objects:
            blocks.setdefault(name, []).append(block)
    if batch.rows:
        from ftaudit.eventlog.hot import PAIRED  # the writer's side, as Batch is
    for model, rows in batch.rows.items():
        event_type = registry[model.model_fields["type"].default]
        blocks.setdefault(event_type.name, []).append(
            _rows_block(rows, event_type.fields, PAIRED.get(model, frozenset()))
        )
    names = sorted(blocks)
    merged = [_merged(blocks[name]) for name in names]
    ends = np.cumsum([len(block) for block in merged]).tolist()
    columns: list[pa.Array] = [
        _type_column(names, ends),
        pa.array(np.concatenate([b.ts_ns for b in merged]) // 1000).cast(
            ENVELOPE_SCHEMA.field("ts").type
        ),
        constant_strings(run_id, n),
        pa.repeat(pa.scalar(incarnation, pa.int64()), n),
        constant_strings(writer, n),
        pa.array(np.concatenate([b.seqs for b in merged])),
        _concat([b.step for b in merged]),
        _concat([b.attempt for b in merged]),
        *_source_columns(source, n),
    ]
    fields = list(ENVELOPE_SCHEMA)
    start = 0
    for name, block, end in zip(names, merged, ends, strict=True):
        for dense, arrow_field in zip(block.payload, registry[name].arrow_fields, strict=True):
            columns.append(_padded(dense, start, n))
            fields.append(arrow_field)
        start = end
    meta = SegmentMeta(
        schema_version=SCHEMA_VERSION,
        run_id=run_id,
        writer=writer,
        incarnation=incarnation,
        first_seq=first_seq,
        last_seq=first_seq + n - 1,
        types=tuple(names),
        prev_digest=prev_digest,
        dropped=dropped,
        mac=DIGEST_PLACEHOLDER if key is not None else "",
    )
    schema = pa.schema(fields, metadata=meta.to_metadata())
    return pa.Table.from_arrays(columns, schema=schema), meta


def _object_blocks(
    batch: Batch,
    registry: EventRegistry,
    key: bytes | None,
    *,
    run_id: str,
    writer: str,
    first_seq: int,
) -> Iterator[tuple[str, _Block]]:
    """The events logged as objects, one block per type."""
    names, order, ends = _group_by_type(batch.events)
    rows = order.tolist()
    seqs = batch.object_seqs(first_seq)[order]
    events = list(map(batch.events.__getitem__, rows))
    if key is not None:
        events = _with_record_macs(events, seqs, key, run_id=run_id, writer=writer)
    values: list[FieldValues] = list(map(vars, events))  # a model's values are its __dict__
    ts_ns = np.frombuffer(batch.ts_ns, dtype=np.int64)[order]
    step = _envelope_int(values, batch.contexts, rows, "step")
    attempt = _envelope_int(values, batch.contexts, rows, "attempt")
    start = 0
    for name, end in zip(names, ends, strict=True):
        block = values[start:end]
        payload = [
            to_arrow(list(map(itemgetter(field_name), block)), annotation)
            for field_name, annotation in registry[name].fields
        ]
        size = end - start
        yield (
            name,
            _Block(
                seqs[start:end],
                ts_ns[start:end],
                step.slice(start, size),
                attempt.slice(start, size),
                payload,
            ),
        )
        start = end


def _rows_block(rows: Rows, fields: tuple[tuple[str, Any], ...], paired: frozenset[int]) -> _Block:
    """The events logged as field values of one type: each field's values (a slice of
    the rows' values, taken in C) converted whole; a field in ``paired`` is a map held
    as two values, its keys and its values (:data:`ftaudit.eventlog.hot.PAIRED`)."""
    payload = []
    at = 0  # where the field's values sit in a row
    for k, (_, annotation) in enumerate(fields):
        if k in paired:
            payload.append(pairs_to_arrow(rows.column(at), rows.column(at + 1), annotation))
            at += 2
        else:
            payload.append(to_arrow(rows.column(at), annotation))
            at += 1
    step, attempt = _context_columns(rows.contexts)
    return _Block(
        np.array(rows.seqs, dtype=np.int64),
        np.array(rows.ts_ns, dtype=np.int64),
        step,
        attempt,
        payload,
    )


def _context_columns(contexts: list[StepAttempt]) -> tuple[pa.Array, pa.Array]:
    """The step and attempt columns of rows logged in ``contexts``: the events of one
    step share one context object, read once."""
    repeats = consecutive_repeats(contexts)
    heads = contexts if repeats is None else repeats[0]
    step = pa.array(list(map(attrgetter("step"), heads)), pa.int64())
    attempt = pa.array(list(map(attrgetter("attempt"), heads)), pa.int64())
    if repeats is None:
        return step, attempt
    index = pa.array(repeats[1])
    return step.take(index), attempt.take(index)


def _merged(blocks: list[_Block]) -> _Block:
    """One type's blocks (its events logged as objects and as field values) as one, in
    sequence order."""
    if len(blocks) == 1:
        return blocks[0]
    seqs = np.concatenate([b.seqs for b in blocks])
    order = pa.array(np.argsort(seqs, kind="stable"))

    def taken(arrays: list[pa.Array]) -> pa.Array:
        return pa.concat_arrays(arrays).take(order)

    return _Block(
        seqs[order.to_numpy()],
        np.concatenate([b.ts_ns for b in blocks])[order.to_numpy()],
        taken([b.step for b in blocks]),
        taken([b.attempt for b in blocks]),
        [taken(list(column)) for column in zip(*(b.payload for b in blocks), strict=True)],
    )


def _concat(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


def _group_by_type(events: list[Event]) -> tuple[list[str], np.ndarray, list[int]]:
    """The batch's type names in sorted order, the row order that groups the rows by type
    (stable: logging order within a type) and where each type's rows end."""
    classes = list(map(type, events))
    name_of = {cls: cls.model_fields["type"].default for cls in set(classes)}
    names = sorted(set(name_of.values()))
    rank = {name: i for i, name in enumerate(names)}
    code_of = {cls: rank[name] for cls, name in name_of.items()}
    # int16 codes: numpy sorts them stably by radix, in linear time
    codes = np.fromiter(map(code_of.__getitem__, classes), dtype=np.int16, count=len(classes))
    order = np.argsort(codes, kind="stable")
    ends = np.cumsum(np.bincount(codes, minlength=len(names))).tolist()
    return names, order, ends


def _type_column(names: list[str], ends: list[int]) -> pa.Array:
    sizes = np.diff(ends, prepend=0).tolist()
    return pa.concat_arrays(list(map(constant_strings, names, sizes)))


def _envelope_int(
    values: Sequence[FieldValues], contexts: Sequence[StepAttempt], rows: list[int], name: str
) -> pa.Array:
    """The events' own ``step`` (or ``attempt``), else that of the step context each was
    logged in (``contexts`` in logging order, ``rows`` the table's); NULL when neither has
    one."""
    own = list(map(itemgetter(name), values))
    column = pa.array(own, pa.int64())
    if not column.null_count:
        return column
    inherited = list(map(attrgetter(name), map(contexts.__getitem__, rows)))
    unset = np.fromiter(map(is_, own, repeat(None)), dtype=np.bool_, count=len(own))
    none = np.fromiter(map(is_, inherited, repeat(None)), dtype=np.bool_, count=len(own))
    merged = np.where(
        unset, int64_numpy(pa.array(inherited, pa.int64()), null=0), int64_numpy(column, null=0)
    )
    return pa.array(merged, pa.int64(), mask=unset & none)


def _padded(dense: pa.Array, start: int, n: int) -> pa.Array:
    """``dense`` at rows ``start ..`` of an ``n``-row column, NULL elsewhere."""
    after = n - start - len(dense)
    if start == 0 and after == 0:
        return dense
    return pa.concat_arrays([pa.nulls(start, dense.type), dense, pa.nulls(after, dense.type)])


def _with_record_macs(
    events: list[Event], seqs: np.ndarray, key: bytes, *, run_id: str, writer: str
) -> list[Event]:
    """``events`` (with sequence numbers ``seqs``) with a MAC on each record that vouches
    for heads."""
    out = list(events)
    for i, event in enumerate(events):
        if event.type in MAC_RECORD_TYPES:
            seq = int(seqs[i])
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


PARQUET_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        # zstd (level 1) encodes this mix's segments 10x smaller than uncompressed at
        # about 1.5x the encoding time, off the GIL; lz4 is faster but 1.4x larger
        # (benchmarks/eventlog_bench.py measures all three)
        "compression": "zstd",
        "use_dictionary": False,  # zstd finds the repeats anyway: a smaller file, 20% less CPU
        "write_page_checksum": True,
        "write_statistics": ["seq", "step", "attempt", "type"],
    }
)
"""How every segment is encoded (``pyarrow.parquet.write_table`` keywords)."""


def write_atomically(table: pa.Table, final: Path, *, fsync: bool, key: bytes | None = None) -> str:
    """Write ``table`` so that ``final`` is either absent or complete, never half-written.

    Written through :func:`~ftaudit.eventlog.atomic.atomic_path` (temp file, fsync,
    rename, fsync of the directory; ``fsync=False`` skips the fsyncs). The file is built
    in memory first, so its digest (see :func:`file_digest`) and, with a ``key``, the MAC
    of that digest can be patched into its footer; a failed write removes its temp file.
    Returns the digest.
    """
    from ftaudit.eventlog.atomic import write_bytes_atomically

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, **PARQUET_OPTIONS)
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
