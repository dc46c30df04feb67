"""An event model's stored layout as plain data (``eventlog/shapes.py``), and the generator
of the built-in types' layouts: ``python -m ftaudit.eventlog.describe``.

The models are the schema's one source. The registry describes a user's type when it is
registered; the built-in types are described once, here, into
``eventlog/builtin_layouts.py``, which reading a run imports instead of the models
(``tests/eventlog/test_builtin_layouts.py`` fails while the two differ).
"""

from __future__ import annotations

import datetime as dt
import enum
import pprint
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from ftaudit.errors import UnsupportedAnnotation
from ftaudit.eventlog.arrow_schema import is_optional, is_struct, model_fields, strip_optional
from ftaudit.eventlog.registry import ENVELOPE_ON_EVENT
from ftaudit.eventlog.shapes import Shape, StoredField

_PRIMITIVES: dict[Any, str] = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    dt.datetime: "timestamp",
}


def shape_of(annotation: Any) -> Shape:
    """The shape of values of ``annotation`` (what ``arrow_schema.arrow_type`` stores)."""
    ann = strip_optional(annotation)
    if ann in _PRIMITIVES:
        return _PRIMITIVES[ann]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return ("enum", ann.__name__, tuple(str(m.value) for m in ann))
    origin = get_origin(ann)
    if origin is Literal:
        return ("enum", "value", tuple(str(a) for a in get_args(ann)))
    if origin in (list, tuple):
        return ("list", shape_of(get_args(ann)[0]))
    if origin is dict:
        key, value = get_args(ann)
        return ("map", shape_of(key), shape_of(value))
    if is_struct(ann):
        fields = tuple((n, shape_of(a)) for n, a in model_fields(ann))
        return ("struct", f"{ann.__module__}.{ann.__qualname__}", fields)
    raise UnsupportedAnnotation(f"no Arrow mapping for {annotation!r}")


def stored_fields(model: type[BaseModel]) -> tuple[StoredField, ...]:
    """The payload fields of an event model (its envelope fields left out), in order."""
    out = []
    for name, info in model.model_fields.items():
        if name in ENVELOPE_ON_EVENT:
            continue
        not_null = info.is_required() and not is_optional(info.annotation)
        out.append((name, shape_of(info.annotation), not_null))
    return tuple(out)


def builtin_layouts() -> tuple[tuple[str, str, tuple[StoredField, ...]], ...]:
    """``(type name, model's qualified name, stored fields)`` of every built-in type."""
    from ftaudit.eventlog.events import BUILTIN_EVENTS

    return tuple(
        (
            model.model_fields["type"].default,
            f"{model.__module__}.{model.__qualname__}",
            stored_fields(model),
        )
        for model in BUILTIN_EVENTS
    )


def writer_identities() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The writer kinds of the process identities, and the trainer roles."""
    from ftaudit.eventlog.identity import Identity, Trainer

    identities = get_args(get_args(Identity)[0])
    kinds = tuple(str(get_args(m.model_fields["kind"].annotation)[0]) for m in identities)
    roles = tuple(str(r) for r in get_args(Trainer.model_fields["role"].annotation))
    return kinds, roles


HEADER = '''"""The built-in event types' stored layouts (``eventlog/shapes.py``), generated from the
models of ``events.py`` and ``identity.py`` by ``python -m ftaudit.eventlog.describe``.

Do not edit: regenerate. ``tests/eventlog/test_builtin_layouts.py`` fails while this
differs from the models.
"""
'''


def generated() -> str:
    """The text of ``builtin_layouts.py`` for the models as they are."""
    kinds, roles = writer_identities()
    return (
        HEADER
        + f"BUILTIN_LAYOUTS = {pprint.pformat(builtin_layouts(), width=100)}\n\n"
        + f"WRITER_KINDS = {kinds!r}\n\n"
        + f"WRITER_ROLES = {roles!r}\n"
    )


def main() -> None:
    """Write ``builtin_layouts.py`` (then ``ruff format`` it: the test compares values)."""
    target = Path(__file__).with_name("builtin_layouts.py")
    target.write_text(generated())
    print(f"wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
