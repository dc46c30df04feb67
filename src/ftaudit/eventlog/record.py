"""The envelope around every stored event, and the stored row as one object."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from ftaudit.eventlog.events import Event

ENVELOPE_SCHEMA = pa.schema(
    [
        pa.field("type", pa.string(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("incarnation", pa.int64(), nullable=False),
        pa.field("writer", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("step", pa.int64()),
        pa.field("attempt", pa.int64()),
        pa.field("source_kind", pa.string(), nullable=False),
        pa.field("source_role", pa.string()),
        pa.field("source_cell", pa.int64()),
        pa.field("source_rank", pa.int64()),
        pa.field("source_engine", pa.int64()),
    ]
)
"""Columns every segment starts with; the ``events`` view shows exactly these."""

ENVELOPE_COLUMNS: tuple[str, ...] = tuple(ENVELOPE_SCHEMA.names)


class Envelope(BaseModel):
    """Who wrote an event, when, and where it sits in its writer's sequence."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    type: str
    ts: dt.datetime
    run_id: str
    incarnation: int
    writer: str
    seq: int
    step: int | None
    attempt: int | None
    source_kind: str
    source_role: str | None = None
    source_cell: int | None = None
    source_rank: int | None = None
    source_engine: int | None = None


class Record(BaseModel):
    """One stored event with its envelope, as read back by :func:`read_records`."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    envelope: Envelope
    event: Event
