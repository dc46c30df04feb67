"""Every DuckDB connection ftaudit opens, so that Ctrl-C or a timeout can stop its queries.

A query runs in DuckDB's C++ code with the GIL released and does not look at Python's
signal flags, so Python's ``KeyboardInterrupt`` reaches it only when it ends (some never
do). ``interrupt_all()`` calls ``interrupt()`` on every open connection, from any thread:
the running query stops at once with ``duckdb.InterruptException``.
"""

from __future__ import annotations

import threading
import weakref

import duckdb

_open: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()
_lock = threading.Lock()


def open_memory() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection (never the module-level default), interruptible."""
    # no progress bar: DuckDB draws it on stdout once a query runs 2 s (a loaded machine),
    # inside the JSON or JUnit report that ft-verify writes there
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")
    with _lock:
        _open.add(con)
    return con


def cursor_of(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A new connection to ``con``'s database (for a statement on another thread),
    interruptible like :func:`open_memory`'s."""
    cursor = con.cursor()
    with _lock:
        _open.add(cursor)
    return cursor


def interrupt_all() -> int:
    """Interrupt the running query of every open connection; returns how many were asked."""
    with _lock:
        connections = list(_open)
    for con in connections:
        try:
            con.interrupt()
        except duckdb.Error:
            pass  # closed meanwhile: nothing runs there
    return len(connections)


__all__ = ["cursor_of", "interrupt_all", "open_memory"]
