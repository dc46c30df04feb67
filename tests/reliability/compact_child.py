"""A child process that compacts a run and dies at the N-th call (``os._exit``).

``python -m tests.reliability.compact_child RUN_DIR N``: N = 0 compacts to the end and
prints how many calls it made (the parent then picks death points across that span).
The calls counted are :mod:`tests.reliability.disk_deaths`'s.
"""

from __future__ import annotations

import sys

from ftaudit.eventlog.compact import compact_run
from tests.reliability.disk_deaths import DiskDeath


def main() -> None:
    run_dir, die_at = sys.argv[1], int(sys.argv[2])
    with DiskDeath(die_at) as death:
        compact_run(run_dir, target_rows=40)
    print(death.calls)


if __name__ == "__main__":
    main()
