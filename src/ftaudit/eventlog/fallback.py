"""Last-chance records: what a writer lost, written where a disk still works.

A writer that fails open keeps training going when the run's disk fails, buffering and
then dropping events; if the disk never heals, nothing in the run says so (its end, and
``run_finished``, are simply missing). So at close (and at exit) a writer that lost
events says it on stderr and writes one small JSON record, ``<fallback dir>/<run id>/
<writer id>.json``, to a fallback directory: ``WriterOptions.fallback_dir``, else
``$FTAUDIT_FALLBACK_DIR``, else ``<temp dir>/ftaudit-fallback``. ``ft-verify`` reads the
records of the run it verifies from the same places (and ``--fallback-dir``) and fails a
run whose writers report losses.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ftaudit.eventlog.lost_events import LostEvents

FALLBACK_ENV = "FTAUDIT_FALLBACK_DIR"


def fallback_dir(configured: str | os.PathLike[str] | None = None) -> Path:
    """Where last-chance records go: ``configured``, else the environment, else temp."""
    if configured:
        return Path(configured)
    env = os.environ.get(FALLBACK_ENV)
    return Path(env) if env else Path(tempfile.gettempdir()) / "ftaudit-fallback"


def write_last_chance(record: LostEvents, folder: Path) -> Path:
    """Write ``record`` (small: it must fit where little room is left); returns its path."""
    path = folder / record.run_id / f"{record.writer}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.model_dump_json(), encoding="utf-8")
    return path


def read_last_chance(folders: list[Path], run_id: str) -> list[tuple[Path, LostEvents]]:
    """Every readable last-chance record of ``run_id`` in ``folders``, by path."""
    # a glob below a folder we built: safe
    paths = [
        p for f in folders if (f / run_id).is_dir() for p in sorted((f / run_id).glob("*.json"))
    ]
    if not paths:
        return []  # the usual case: no writer lost events, and no model is imported
    from ftaudit.eventlog.lost_events import LostEvents

    found: dict[Path, LostEvents] = {}
    for path in paths:
        try:
            record = LostEvents.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
            continue
        if record.run_id == run_id:
            found[path.resolve()] = record
    return sorted(found.items())


__all__ = [
    "FALLBACK_ENV",
    "fallback_dir",
    "read_last_chance",
    "write_last_chance",
]
