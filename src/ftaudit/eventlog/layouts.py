"""Which payload columns a segment of each schema version must hold.

A built-in event type's fields only grow (``events.py``: added at the top level, always with
a default). A segment written before a field existed lacks its column, and readers then
apply the model's default. That is only true of a segment older than the field: a segment
of a version that had the field and lacks its column was damaged or forged, and reading
it with the default would hide what it held. So the version that added each field is
recorded here, and the footer check (``reader.check_segment``) refuses a segment of version
V that lacks a column its types had at V.

Version 1's layout grew while its number stayed 1 (the fields below, day one to day six),
so a version-1 segment may lack any of them; every other field of a type it holds has
been written since that type existed. Version 2 is the first whose layout is fixed: a
version-2 segment holds every column of its types. Adding a field to a built-in type now
means raising ``SCHEMA_VERSION`` and recording the field here with the new version
(``tests/eventlog/test_schema.py`` checks both against frozen layouts).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ftaudit.eventlog.registry import EventType

SCHEMA_VERSION = 2
"""Recorded in every segment; readers refuse segments of a newer version, and refuse a
segment that lacks a column its version holds (:func:`missing_column`)."""

FIELDS_ADDED: Mapping[str, Mapping[str, int]] = MappingProxyType(
    {
        # a version-1 segment may lack these (added while version 1 was current)
        "checkpoint_saved": {"chain_heads": 2, "job_heads": 2, "mac": 2},
        "run_finished": {"final_heads": 2, "mac": 2},
        "sample_advantage_summary": {"pure_advantage_loss": 2},
        "trainer_weight_checksum": {"replica_local": 2},
    }
)
"""Built-in event type -> field -> the first schema version whose segments always hold it.
A field not named here is held by every segment that holds its type."""


def required_since(event_type: EventType, field: str) -> int:
    """The first schema version whose segments holding ``event_type`` always hold ``field``."""
    return FIELDS_ADDED.get(event_type.name, {}).get(field, 1)


def missing_column(event_type: EventType, version: int, columns: set[str]) -> str | None:
    """The first column of ``event_type`` that a segment of ``version`` must hold and whose
    ``columns`` lack it; None when none is missing."""
    for name, _, _ in event_type.stored:
        column = event_type.column(name)
        if column not in columns and required_since(event_type, name) <= version:
            return column
    return None


__all__ = ["FIELDS_ADDED", "SCHEMA_VERSION", "missing_column", "required_since"]
