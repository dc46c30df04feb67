"""Dying at the N-th disk call of a child process, so a test can kill it at every point.

Counted are the calls that change or sync the disk (opens, fsyncs, renames, removals,
folder creations and removals): counting every Python call would crowd the death points
into the first reads, where pyarrow makes many calls per file.
"""

from __future__ import annotations

import os
import sys
from types import FrameType, TracebackType

KILLED = 77
"""The exit code of a child that died on purpose."""
DISK_CALLS = frozenset({"open", "fsync", "replace", "rename", "unlink", "mkdir", "rmdir"})


class DiskDeath:
    """Within ``with``: count the disk calls, and ``os._exit(KILLED)`` at call ``die_at``
    (0: never; :attr:`calls` then says how many there were)."""

    def __init__(self, die_at: int) -> None:
        self.die_at = die_at
        self.calls = 0

    def _hook(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "c_call" or getattr(arg, "__name__", None) not in DISK_CALLS:
            return
        self.calls += 1
        if self.die_at and self.calls >= self.die_at:
            os._exit(KILLED)

    def __enter__(self) -> DiskDeath:
        sys.setprofile(self._hook)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        sys.setprofile(None)
