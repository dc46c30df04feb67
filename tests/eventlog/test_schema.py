"""The schema is a public surface: user types, evolution, and a snapshot of every field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import Field

from ftaudit.eventlog import (
    Event,
    EventRegistry,
    EventWriter,
    Trainer,
    WriterOptions,
    connect,
    default_registry,
    read_records,
)
from ftaudit.eventlog.arrow_schema import strip_optional
from ftaudit.eventlog.events import BUILTIN_EVENTS, SCHEMA_VERSION
from ftaudit.eventlog.layouts import FIELDS_ADDED, required_since

SNAPSHOT = Path(__file__).with_name("schema_snapshot.json")


def _schema_now() -> dict[str, dict[str, str]]:
    return {
        t.name: {f.name.split(".", 1)[1]: str(f.type) for f in t.arrow_fields}
        for t in default_registry
    }


def test_event_schema_matches_the_snapshot():
    """A failure here means the stored schema changed: make it a deliberate diff.

    Regenerate with ``FTAUDIT_UPDATE_SNAPSHOT=1 pytest tests/eventlog/test_schema.py``;
    only add fields (with defaults), never rename or retype one.
    """
    import os

    if os.environ.get("FTAUDIT_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(_schema_now(), indent=2, sort_keys=True) + "\n")
    assert json.loads(SNAPSHOT.read_text()) == _schema_now()


class GradNormSpike(Event):
    type: Literal["grad_norm_spike"] = "grad_norm_spike"
    norm: float


class GradNormSpikeV2(Event):
    """The same type after a release added a field (with a default, as the rules say)."""

    type: Literal["grad_norm_spike"] = "grad_norm_spike"
    norm: float
    layer: str = "unknown"


def _writer(tmp_path: Path, registry: EventRegistry) -> EventWriter:
    return EventWriter(
        tmp_path,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="r",
        incarnation=0,
        options=WriterOptions(fsync=False),
        registry=registry,
    )


def test_user_registered_type_gets_its_view(tmp_path: Path):
    registry = EventRegistry(BUILTIN_EVENTS)
    registry.register(GradNormSpike)
    with _writer(tmp_path, registry) as writer:
        writer.log(GradNormSpike(step=4, attempt=0, norm=12.5))
    con = connect(tmp_path, registry=registry)
    assert con.execute("SELECT step, norm FROM grad_norm_spike").fetchall() == [(4, 12.5)]
    # a process that never imported the user's model still gets the view, from the columns
    assert connect(tmp_path).execute("SELECT norm FROM grad_norm_spike").fetchall() == [(12.5,)]


def test_segment_written_before_a_field_was_added_still_reads(tmp_path: Path):
    old = EventRegistry(BUILTIN_EVENTS)
    old.register(GradNormSpike)
    with _writer(tmp_path, old) as writer:
        writer.log(GradNormSpike(step=1, attempt=0, norm=1.0))
    new = EventRegistry(BUILTIN_EVENTS)
    new.register(GradNormSpikeV2)
    with _writer(tmp_path, new) as writer:
        writer.log(GradNormSpikeV2(step=2, attempt=0, norm=2.0, layer="mlp.3"))

    rows = connect(tmp_path, registry=new).execute(
        "SELECT step, norm, layer FROM grad_norm_spike ORDER BY step"
    )
    assert rows.fetchall() == [(1, 1.0, None), (2, 2.0, "mlp.3")]
    events = sorted((r.event for r in read_records(tmp_path, registry=new)), key=lambda e: e.step)
    assert [e.layer for e in events] == ["unknown", "mlp.3"]  # the default fills the gap


def test_only_the_old_segments_exist_yet_the_new_field_has_a_column(tmp_path: Path):
    old = EventRegistry(BUILTIN_EVENTS)
    old.register(GradNormSpike)
    with _writer(tmp_path, old) as writer:
        writer.log(GradNormSpike(step=1, attempt=0, norm=1.0))
    new = EventRegistry(BUILTIN_EVENTS)
    new.register(GradNormSpikeV2)
    rows = connect(tmp_path, registry=new).execute("SELECT layer FROM grad_norm_spike")
    assert rows.fetchall() == [(None,)]


def test_registry_refuses_bad_types():
    registry = EventRegistry(BUILTIN_EVENTS)
    registry.register(GradNormSpike)
    registry.register(GradNormSpike)  # the same class again is fine
    with pytest.raises(ValueError, match="already registered"):
        registry.register(GradNormSpikeV2)

    class Events(Event):
        type: Literal["events"] = "events"

    with pytest.raises(ValueError, match="reserved"):
        registry.register(Events)

    class WithUnion(Event):
        type: Literal["with_union"] = "with_union"
        value: int | str

    with pytest.raises(TypeError, match="not storable"):
        registry.register(WithUnion)


def test_an_optional_constrained_field_is_stored(tmp_path: Path):
    """``Annotated[X, ...] | None`` is stored as an ``X`` column (one helper,
    ``strip_optional``, reads annotations for the writer and the validation on read)."""

    class Clipped(Event):
        type: Literal["clipped"] = "clipped"
        ratio: Annotated[float, Field(ge=0.0)] | None = None
        how: Annotated[Literal["norm", "value"], Field(description="clip kind")] | None = None

    registry = EventRegistry(BUILTIN_EVENTS)
    registry.register(Clipped)
    with _writer(tmp_path, registry) as writer:
        writer.log(Clipped(step=3, attempt=0, ratio=0.5, how="norm"))
    con = connect(tmp_path, registry=registry)
    assert con.execute("SELECT step, ratio, how FROM clipped").fetchall() == [(3, 0.5, "norm")]
    assert strip_optional(Clipped.model_fields["how"].annotation) == Literal["norm", "value"]


LAYOUTS = Path(__file__).with_name("schema_layouts.json")
"""Per schema version, the columns a segment holding each type always holds. Frozen: a
version's layout never changes once released; a new version adds its own entry."""


def test_each_versions_layout_is_recorded():
    """Readers refuse a segment that lacks a column its version holds (a missing column
    is an older segment's only when it is older than the field): so a field added to a
    built-in type needs a new ``SCHEMA_VERSION`` and its entry in ``eventlog/layouts.py``,
    and a new type joins the current version's layout here."""
    layouts = json.loads(LAYOUTS.read_text())
    assert max(map(int, layouts)) == SCHEMA_VERSION
    for version, types in layouts.items():
        for name, fields in types.items():
            event_type = default_registry[name]
            since = {n: required_since(event_type, n) for n, _ in event_type.fields}
            held = [n for n, v in since.items() if v <= int(version)]
            assert sorted(held) == fields, (version, name)
    current = {t.name: sorted(n for n, _ in t.fields) for t in default_registry}
    assert layouts[str(SCHEMA_VERSION)] == current


def test_fields_added_after_version_1_have_defaults():
    """An older segment lacks them: the model's default must stand in."""
    for name, fields in FIELDS_ADDED.items():
        model = default_registry[name].model
        for field, version in fields.items():
            assert 1 < version <= SCHEMA_VERSION, (name, field)
            assert not model.model_fields[field].is_required(), (name, field)
