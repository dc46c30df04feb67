"""The step and attempt that events belong to, carried by context variables.

Context variables follow threads started inside the context (via ``contextvars``
propagation of asyncio tasks and ``copy_context``), and nested contexts override and
then restore the outer values.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from ftaudit.errors import UsageError


@dataclass(frozen=True, slots=True)
class StepAttempt:
    """A step and attempt. Slots: a writer buffers one per step until the flush, and one
    tracked object holds it (with a ``__dict__``, two)."""

    step: int | None = None
    attempt: int | None = None


NO_CONTEXT = StepAttempt()
"""The value outside any :func:`step_context` (one shared object, so a writer can buffer it
per event without allocating)."""

_CURRENT: ContextVar[StepAttempt] = ContextVar("ftaudit_step_attempt", default=NO_CONTEXT)


current = _CURRENT.get
"""``current()``: the innermost step and attempt, or Nones outside any
:func:`step_context`. The context variable's own method: the writer calls it per event,
and a Python function around it cost another call frame."""


@contextmanager
def step_context(step: int, attempt: int = 0) -> Iterator[StepAttempt]:
    """Events logged inside take this step and attempt unless they set their own."""
    if step < 0 or attempt < 0:
        raise UsageError(f"step and attempt must be non-negative, got {step}, {attempt}")
    value = StepAttempt(step, attempt)
    token = _CURRENT.set(value)
    try:
        yield value
    finally:
        _CURRENT.reset(token)
