"""ftaudit: prove that a fault-tolerant training run trained every sample exactly once."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ftaudit.eventlog.context import step_context

if TYPE_CHECKING:
    import duckdb

__all__ = ["connect", "step_context"]
__version__ = "0.1.0"


def connect(run_dir: str | os.PathLike[str], *, sandbox: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection over a run: a view per event type, ``events``, ``metrics`` and,
    once the verifier is importable, the committed-history views."""
    from ftaudit.eventlog.connect import connect as _connect

    return _connect(run_dir, sandbox=sandbox)
