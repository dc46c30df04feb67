"""A command's start-up: the cyclic garbage collector waits until the imports are made.

Before ``ft-verify`` looks at a run it imports about 500 modules (typer, pydantic,
pyarrow, DuckDB, the verifier). Every 700 new objects the collector scans the young
ones, and now and then every object there is: about 60 ms of ``ft-verify``'s CPU on a
small run (150 collections), and none of those objects is garbage (modules, classes and
functions live as long as the process). :func:`collecting_late` raises the collector's
threshold while a command starts; the command calls :func:`imports_made` once its heavy
imports are done: the objects made so far are moved out of the collector's sight
(``gc.freeze``) and the usual threshold applies again. A command that never calls it
runs with the raised threshold: its collections are rarer, cycles are still collected.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

STARTUP_THRESHOLD = 200_000
"""New objects between two collections while a command starts (CPython's default: 700)."""

_usual: list[tuple[int, int, int]] = []
"""The thresholds to go back to, while :func:`collecting_late` runs (the process's own)."""


@contextmanager
def collecting_late() -> Iterator[None]:
    """Run a command with the collector's start-up threshold; restore the usual one after."""
    _usual.append(gc.get_threshold())
    gc.set_threshold(STARTUP_THRESHOLD, *_usual[-1][1:])
    try:
        yield
    finally:
        gc.set_threshold(*_usual.pop())


def imports_made() -> None:
    """The command's imports are done: freeze what exists, collect as usual from here on.

    Does nothing outside :func:`collecting_late` (``ftaudit verify``, a test invoking
    the command) or when called again.
    """
    if not _usual or gc.get_threshold()[0] != STARTUP_THRESHOLD:
        return
    gc.freeze()
    gc.set_threshold(*_usual[-1])
