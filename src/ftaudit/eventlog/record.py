"""The envelope around every stored event, and the stored row as one object."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict

from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS as ENVELOPE_COLUMNS  # re-exported
from ftaudit.eventlog.envelope import ENVELOPE_SCHEMA as ENVELOPE_SCHEMA
from ftaudit.eventlog.events import Event


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
