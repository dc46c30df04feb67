"""A writer's flush as one segment table: the envelope columns, then each type's payload.

The writer's side of :mod:`ftaudit.eventlog.segment` (which holds the footer, the digest
and the atomic write that readers share): it converts events, so it imports their models.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ftaudit.eventlog.arrays import consecutive_repeats, constant_strings, int64_numpy
from ftaudit.eventlog.arrow_schema import pairs_to_arrow, to_arrow
from ftaudit.eventlog.envelope import ENVELOPE_SCHEMA
from ftaudit.eventlog.events import Event
from ftaudit.eventlog.identity import Identity
from ftaudit.eventlog.keys import MAC_RECORD_TYPES, record_mac
from ftaudit.eventlog.layouts import SCHEMA_VERSION
from ftaudit.eventlog.registry import EventRegistry
from ftaudit.eventlog.segment import DIGEST_PLACEHOLDER, SegmentMeta

if TYPE_CHECKING:  # the writer's buffers
    from ftaudit.eventlog.batch import Batch, Rows
    from ftaudit.eventlog.context import StepAttempt


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
