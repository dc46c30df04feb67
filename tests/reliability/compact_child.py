"""A child process that compacts a run and dies at the N-th call (``os._exit``).

``python -m tests.reliability.compact_child RUN_DIR N``: N = 0 compacts to the end and
prints how many calls it made (the parent then picks death points across that span).
Counted are the calls that change or sync the disk (opens, fsyncs, renames, removals,
folder creations and removals): counting every Python call would crowd the death points
into the first reads, where pyarrow makes many calls per file.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

from ftaudit.eventlog.compact import compact_run

KILLED = 77
DISK_CALLS = frozenset({"open", "fsync", "replace", "rename", "unlink", "mkdir", "rmdir"})


def main() -> None:
    run_dir, die_at = sys.argv[1], int(sys.argv[2])
    calls = [0]

    def hook(frame: FrameType, event: str, arg: object) -> None:
        if event != "c_call" or getattr(arg, "__name__", None) not in DISK_CALLS:
            return
        calls[0] += 1
        if die_at and calls[0] >= die_at:
            os._exit(KILLED)

    sys.setprofile(hook)
    compact_run(run_dir, target_rows=40)
    sys.setprofile(None)
    print(calls[0])


if __name__ == "__main__":
    main()
