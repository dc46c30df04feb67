"""``connect(RUN_DIR)``: a DuckDB connection with the run's views."""

from __future__ import annotations

import os

import duckdb

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.reader import scan_run
from ftaudit.eventlog.registry import EventRegistry, default_registry
from ftaudit.eventlog.views import create_views, lock_down


def connect(
    run_dir: str | os.PathLike[str],
    *,
    sandbox: bool = False,
    registry: EventRegistry = default_registry,
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB with a view per event type, ``events`` and ``metrics``.

    With ``sandbox=True`` the segments are loaded into memory and file access is then
    switched off, so queries cannot read or write anything else.
    Raises :class:`ftaudit.errors.UnusableInputError` naming the first bad file.
    """
    scan = scan_run(run_dir)
    con = duckdb.connect()
    try:
        create_views(con, scan, registry, materialize=sandbox)
    except duckdb.Error as exc:
        con.close()
        raise CorruptSegmentError(
            scan.run_dir, f"segments cannot be read together: {exc}"
        ) from None
    if sandbox:
        lock_down(con)
    return con
