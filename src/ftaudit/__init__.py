"""ftaudit: prove that a fault-tolerant training run trained every sample exactly once."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from ftaudit.eventlog.context import step_context

__all__ = ["connect", "step_context"]
__version__ = "0.1.0"


def connect(run_dir: str | os.PathLike[str], *, sandbox: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection over a run: a view per event type, ``events``, ``metrics``, the
    checkpoint views, the data-identity views (``manifest_items``, ``fed_samples``,
    ``fed_content``: the run's dataset manifests are loaded too) and the committed-history
    views (``committed_steps``, ``committed_metrics``, ``timeline``, ``lineage``,
    ``incarnations``, ``abandoned_events``).

    Sandboxed by default: the run is loaded into memory and every file access is then
    refused (no ``COPY``, ``read_csv``, ``glob``, ``ATTACH``). Pass ``sandbox=False`` to
    keep DuckDB's file access, e.g. to export results or join other files.
    """
    from ftaudit.eventlog.connect import connect as _connect
    from ftaudit.verifier.views import create_history_views

    con = _connect(run_dir, sandbox=sandbox)
    try:
        create_history_views(con)
    except BaseException:
        con.close()
        raise
    return con


def __getattr__(name: str) -> Any:
    # Lazy, so that `import ftaudit` (and every CLI `--help`) does not load pyarrow/duckdb.
    if name == "step_context":
        from ftaudit.eventlog.context import step_context

        return step_context
    raise AttributeError(f"module 'ftaudit' has no attribute {name!r}")
