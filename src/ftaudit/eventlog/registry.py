"""Which event types exist: the built-ins plus any a user registers in their own code.

A registered type gets its own columns in segments and its own SQL view, named by its
``type`` literal; nothing in ftaudit has to change.

The built-in types are registered from their generated layouts
(``eventlog/builtin_layouts.py``): reading and verifying a run needs their columns, not
their models, so ``events.py`` (and pydantic's model building) is imported only when a
model is asked for (a writer, ``read_records``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from importlib import import_module
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ftaudit.errors import UsageError
from ftaudit.eventlog.builtin_layouts import BUILTIN_LAYOUTS
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.shapes import StoredField, arrow_of

if TYPE_CHECKING:
    from ftaudit.eventlog.events import Event

ENVELOPE_ON_EVENT = frozenset({"type", "step", "attempt"})
"""Fields of :class:`Event` stored as envelope columns, not payload columns."""

_TYPE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class EventType:
    """One registered event type and how its payload is stored."""

    name: str
    stored: tuple[StoredField, ...]
    """``(field name, shape, not NULL)`` of the payload, in declaration order."""
    arrow_fields: tuple[pa.Field, ...]
    model_name: str
    """The model's qualified class name (``module.Class``)."""
    given: type[Event] | None = field(default=None, compare=False, repr=False)
    """The model, when registered from it (None: imported on first use, by name)."""

    @cached_property
    def model(self) -> type[Event]:
        """The pydantic model of the type (imports it on first use)."""
        if self.given is not None:
            return self.given
        module, _, name = self.model_name.rpartition(".")
        return getattr(import_module(module), name)

    @cached_property
    def fields(self) -> tuple[tuple[str, Any], ...]:
        """``(field name, annotation)`` of the payload, in declaration order (the model's)."""
        from ftaudit.eventlog.arrow_schema import model_fields

        return tuple(model_fields(self.model, ENVELOPE_ON_EVENT))

    def column(self, field: str) -> str:
        """The segment column that stores ``field`` of this type: ``"<type>.<field>"``."""
        return f"{self.name}.{field}"


def _arrow_fields(name: str, stored: tuple[StoredField, ...]) -> tuple[pa.Field, ...]:
    return tuple(pa.field(f"{name}.{n}", arrow_of(shape)) for n, shape, _ in stored)


class EventRegistry:
    """Maps ``type`` names to event models. ``default_registry`` holds the built-ins."""

    def __init__(self, models: tuple[type[Event], ...] = ()) -> None:
        self._types: dict[str, EventType] = {}
        for model in models:
            self.register(model)

    @classmethod
    def builtin(cls) -> EventRegistry:
        """The built-in types, from their generated layouts (no model is imported)."""
        registry = cls()
        for name, model_name, stored in BUILTIN_LAYOUTS:
            registry._types[name] = EventType(name, stored, _arrow_fields(name, stored), model_name)
        return registry

    def register(self, model: type[Event]) -> type[Event]:
        """Add ``model``; usable as a class decorator. Re-registering the same class is a no-op."""
        # the models' side: a process that only reads runs never registers one
        from typing import get_args

        from ftaudit.eventlog.arrow_schema import arrow_type, model_fields
        from ftaudit.eventlog.describe import stored_fields
        from ftaudit.eventlog.events import Event

        if not (isinstance(model, type) and issubclass(model, Event)):
            raise TypeError(f"{model!r} must subclass ftaudit.eventlog.Event")
        literal = get_args(model.model_fields["type"].annotation)
        if len(literal) != 1 or not isinstance(literal[0], str):
            raise TypeError(f"{model.__name__}.type must be a single string Literal")
        name = literal[0]
        if not _TYPE_NAME.match(name) or name in {"events", "metrics", "segments"}:
            raise UsageError(f"event type name {name!r} must be snake_case and not a reserved view")
        known = self._types.get(name)
        if known is not None:
            if known.model is model:
                return model
            raise UsageError(f"event type {name!r} is already registered by {known.model!r}")
        fields = tuple(model_fields(model, ENVELOPE_ON_EVENT))
        clash = {n for n, _ in fields} & set(ENVELOPE_COLUMNS)
        if clash:
            raise UsageError(
                f"{model.__name__}: field(s) {sorted(clash)} clash with envelope columns; rename"
            )
        arrow_fields = tuple(pa.field(f"{name}.{n}", arrow_type(a)) for n, a in fields)
        qualified = f"{model.__module__}.{model.__qualname__}"
        self._types[name] = EventType(
            name, stored_fields(model), arrow_fields, qualified, given=model
        )
        return model

    def get(self, name: str) -> EventType | None:
        return self._types.get(name)

    def __getitem__(self, name: str) -> EventType:
        return self._types[name]

    def __iter__(self) -> Iterator[EventType]:
        return iter(self._types.values())

    def __contains__(self, name: object) -> bool:
        return name in self._types


default_registry = EventRegistry.builtin()


def register_event(model: type[Event]) -> type[Event]:
    """Class decorator: register a user event type in the default registry."""
    return default_registry.register(model)
