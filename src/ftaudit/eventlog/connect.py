"""``connect(RUN_DIR)``: a DuckDB connection with the run's views."""

from __future__ import annotations

import os

import duckdb

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.connections import open_memory
from ftaudit.eventlog.reader import scan_run
from ftaudit.eventlog.registry import EventRegistry, default_registry
from ftaudit.eventlog.rundir import relisting
from ftaudit.eventlog.views import create_views, lock_down


def connect(
    run_dir: str | os.PathLike[str],
    *,
    sandbox: bool = True,
    registry: EventRegistry = default_registry,
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB with a view per event type, ``events`` and ``metrics``.

    The segments are loaded into memory, then (by default) file access is switched off
    and the configuration locked, so queries cannot read or write anything else, nor
    switch the sandbox off again. ``sandbox=False`` is the explicit opt-out, for code
    that wants to join the run with other files or export results with ``COPY``.
    Raises :class:`ftaudit.errors.UnusableInputError` naming the first bad file.
    """

    def load() -> duckdb.DuckDBPyConnection:
        scan = scan_run(run_dir)
        con = open_memory()
        try:
            create_views(con, scan, registry)
        except BaseException as exc:
            con.close()
            if not isinstance(exc, duckdb.Error):
                raise
            raise CorruptSegmentError(
                scan.run_dir, f"segments cannot be read together: {exc}"
            ) from None
        return con

    con = relisting(load)  # listed again when a writer's roll removed a listed segment
    if sandbox:
        lock_down(con)
    return con
