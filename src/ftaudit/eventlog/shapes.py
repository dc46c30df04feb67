"""How a stored field's values are shaped, as plain data: what reading a run needs of a model.

The models of ``events.py`` are the schema's one source; ``eventlog/describe.py`` turns a
model's annotations into the shapes below, and ``eventlog/builtin_layouts.py`` holds
those of the built-in types, generated from them. Reading and verifying a run uses the
shapes only (the Arrow types of the columns, the fields that may not be NULL, the known
values of an enum), so it imports and builds no pydantic model.

A shape is one of:

* ``"int"``, ``"float"``, ``"bool"``, ``"str"``, ``"timestamp"`` (UTC, microseconds);
* ``("enum", what, values)``: an enum (``what`` is its class name) or a string literal
  (``what`` is ``"value"``), stored as its values' strings;
* ``("list", item)``: a list, or a homogeneous tuple;
* ``("map", key, value)``: a dict;
* ``("struct", model, ((field, shape), ...))``: a nested model, named by its qualified
  class name.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

Shape = Any
"""A shape as described above (nested tuples and strings)."""

StoredField = tuple[str, Shape, bool]
"""One payload field of an event type: its name, its shape, and whether a row of the type
must hold a value (the model requires it and does not allow None)."""

RUNS = "ftaudit.eventlog.intruns.IntRuns"
"""The struct name of an id set stored as runs (``{starts: [...], lengths: [...]}``)."""

_PRIMITIVES = {
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "str": pa.string(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


def arrow_of(shape: Shape) -> pa.DataType:
    """The Arrow type that stores values of ``shape``."""
    if isinstance(shape, str):
        return _PRIMITIVES[shape]
    kind = shape[0]
    if kind == "enum":
        return pa.string()
    if kind == "list":
        return pa.list_(arrow_of(shape[1]))
    if kind == "map":
        return pa.map_(arrow_of(shape[1]), arrow_of(shape[2]))
    return pa.struct([pa.field(name, arrow_of(inner)) for name, inner in shape[2]])


def is_runs(shape: Shape) -> bool:
    """Whether ``shape`` is an id set stored as runs (:class:`~ftaudit.eventlog.IntRuns`)."""
    return isinstance(shape, tuple) and shape[0] == "struct" and shape[1] == RUNS


__all__ = ["RUNS", "Shape", "StoredField", "arrow_of", "is_runs"]
