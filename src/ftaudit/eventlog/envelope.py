"""The envelope's columns: what every segment starts with, before the events' payloads.

Apart from the models of ``record.py`` so that reading a run imports no pydantic model.
"""

from __future__ import annotations

import pyarrow as pa

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
