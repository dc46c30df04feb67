"""The built-in types' generated layouts (``eventlog/builtin_layouts.py``) are the models'.

Reading and verifying a run uses the generated layouts, not the models (its start-up builds
no pydantic model); the models stay the schema's one source. These tests fail when the two
drift apart: regenerate with ``python -m ftaudit.eventlog.describe`` (then ``ruff format``).
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa
import pytest

from ftaudit.eventlog import Event, EventRegistry, default_registry
from ftaudit.eventlog.builtin_layouts import BUILTIN_LAYOUTS, WRITER_KINDS, WRITER_ROLES
from ftaudit.eventlog.describe import builtin_layouts, shape_of, writer_identities
from ftaudit.eventlog.events import BUILTIN_EVENTS, CellOutcome
from ftaudit.eventlog.shapes import arrow_of
from ftaudit.eventlog.vocabulary import RankOutcome


def test_the_generated_layouts_are_the_models():
    assert builtin_layouts() == BUILTIN_LAYOUTS
    assert writer_identities() == (WRITER_KINDS, WRITER_ROLES)


def test_the_default_registry_matches_one_built_from_the_models():
    from_models = EventRegistry(BUILTIN_EVENTS)
    assert [t.name for t in default_registry] == [t.name for t in from_models]
    for generated in default_registry:
        built = from_models[generated.name]
        assert generated.stored == built.stored, generated.name
        # arrow_of(shape) is arrow_schema.arrow_type(annotation), field by field
        assert generated.arrow_fields == built.arrow_fields, generated.name
        assert generated.model is built.model
        assert generated.fields == built.fields


def test_a_changed_model_no_longer_matches_its_layout():
    # what the first test catches: a field added to a model (or a value to an enum)
    class Changed(Event):
        type: Literal["step_end"] = "step_end"
        accepted_attempt: int
        cells: dict[int, CellOutcome]
        note: str = ""

    (stored,) = [s for name, _, s in BUILTIN_LAYOUTS if name == "step_end"]
    assert EventRegistry((Changed,))["step_end"].stored != stored
    assert shape_of(RankOutcome) == ("enum", "RankOutcome", ("normal", "discarded_should_retry"))


@pytest.mark.parametrize(
    ("shape", "arrow"),
    [
        ("int", pa.int64()),
        (("list", ("enum", "value", ("a",))), pa.list_(pa.string())),
        (("map", "str", "float"), pa.map_(pa.string(), pa.float64())),
        (("struct", "m.M", (("x", "bool"),)), pa.struct([pa.field("x", pa.bool_())])),
    ],
)
def test_arrow_of_each_kind_of_shape(shape, arrow):
    assert arrow_of(shape) == arrow
