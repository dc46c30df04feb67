"""A command's start-up: the collector waits until the imports are made and then runs
rarely, and numpy's large arrays go on small pages.

Before ``ft-verify`` looks at a run it imports about 500 modules (typer, pydantic,
pyarrow, DuckDB, the verifier). Every 700 new objects the collector scans the young
ones, and now and then every object there is: about 60 ms of ``ft-verify``'s CPU on a
small run (150 collections), and none of those objects is garbage (modules, classes and
functions live as long as the process). :func:`collecting_late` raises the collector's
threshold while a command starts; the command calls :func:`imports_made` once its heavy
imports are done: the objects made so far are moved out of the collector's sight
(``gc.freeze``) and :data:`WORK_THRESHOLD` applies. A command that never calls it runs
with the start-up threshold: its collections are rarer still, cycles are still collected.

:func:`small_pages_for_numpy` is for the verifier's large, short-lived arrays (see there).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from contextlib import contextmanager

STARTUP_THRESHOLD = 200_000
"""New objects between two collections while a command starts (CPython's default: 700)."""

WORK_THRESHOLD = 50_000
"""New objects between two collections once the imports are made. The rules keep what
they make of the run (an allocation, a step, a snapshot group: 156,000 objects at 10,000
steps x 16 cells), and with CPython's 700 the collector walked them all again every
70,000 new objects: 1,114 collections, 0.46 s at that size (0.38 s of it full ones),
against 11 collections and 0.06 s at this threshold (``gc.callbacks``, one process).
Objects in young reference cycles wait longer to be freed (50,000 at most)."""

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
    """The command's imports are done: freeze what exists, collect every
    :data:`WORK_THRESHOLD` new objects from here on (the usual threshold comes back when
    :func:`collecting_late` ends).

    Does nothing outside :func:`collecting_late` (``ftaudit verify``, a test invoking
    the command) or when called again.
    """
    if not _usual or gc.get_threshold()[0] != STARTUP_THRESHOLD:
        return
    gc.freeze()
    gc.set_threshold(WORK_THRESHOLD, *_usual[-1][1:])


def small_pages_for_numpy() -> None:
    """Ask numpy (not yet imported) not to back its large arrays with transparent huge pages.

    On Linux numpy marks every array of 4 MB or more ``MADV_HUGEPAGE``. Under the kernel's
    usual ``defrag=madvise`` setting, the first touch of such memory makes the kernel
    compact memory then and there, and a verifier that has just loaded a run into DuckDB
    has fragmented memory: filling one fresh 360 MB array took 0.84 s there, against
    0.13 s on small pages (0.06 s in a fresh process). ``ft-verify`` on a run of 45 M fed
    samples spent 1.0-1.7 s less CPU on small pages (2.9-3.7 s of system time against
    2.0-2.1 s). Set through numpy's own switch, ``NUMPY_MADVISE_HUGEPAGE``, which numpy
    reads once, at import; a value the user set is kept, and the command's child
    processes inherit it.
    """
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
