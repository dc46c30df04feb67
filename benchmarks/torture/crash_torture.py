"""Crash torture of the event writer: 1,000 processes killed at random points, each checked.

SIGKILL from outside, ``os._exit`` at a random function call, a real SIGSEGV; after each
death the log must read, hold every acknowledged event and lose exactly the unflushed
tail; at the end FT001 must report each temp file as a truncated tail and nothing else.
The checks are in ``tests/reliability/crash_torture.py`` (the CI test runs 100 trials).

Run: ``.venv/bin/python benchmarks/torture/crash_torture.py [--trials 1000] [--seed 1]``
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from tests.reliability.crash_torture import TortureStats, run_torture


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    def tick(trial: int, stats: TortureStats) -> None:
        if (trial + 1) % 100 == 0:
            print(f"  {stats.summary()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="ftaudit-torture-") as scratch:
        stats = run_torture(Path(scratch) / "run", args.trials, seed=args.seed, on_trial=tick)
    machine = f"python {platform.python_version()}, {platform.machine()}"
    print(f"# crash_torture: seed {args.seed}, {machine}")
    print(stats.summary())


if __name__ == "__main__":
    main()
