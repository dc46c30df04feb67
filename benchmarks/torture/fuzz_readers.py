"""Fuzzing the readers: 1,500 damaged runs (hypothesis picks the damage), judged by ft-verify.

Every damaged copy of a clean run must make ``ft-verify`` exit 1 (a rule failed) or 2 (the
input is unusable) with one clear line, never 0 and never a traceback. Prints how often
each kind of damage was tried and which exit code it got. The corruptions are in
``tests/support/corrupt.py``.

Run: ``.venv/bin/python benchmarks/torture/fuzz_readers.py [--examples 1500]``
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.support.cli_runs import write_run
from tests.support.corrupt import CORRUPTIONS, damage_copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=1500)
    args = parser.parse_args()
    seen: Counter[tuple[str, int]] = Counter()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ftaudit-fuzz-") as scratch:
        base = write_run(Path(scratch) / "base")

        @settings(
            max_examples=args.examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(kind=st.sampled_from(sorted(CORRUPTIONS)), seed=st.integers(0, 2**32 - 1))
        def fuzz(kind: str, seed: int) -> None:
            _, verdict = damage_copy(base, kind, random.Random(seed))
            seen[(kind, verdict.code)] += 1

        fuzz()
    total = sum(seen.values())
    print(f"# fuzz_readers: {total} damaged runs in {time.perf_counter() - started:.0f} s")
    print("| damage | tried | exit 1 (rule failed) | exit 2 (unusable) | exit 0 |")
    print("|---|---:|---:|---:|---:|")
    for kind in sorted(CORRUPTIONS):
        one, two = seen[(kind, 1)], seen[(kind, 2)]
        print(f"| {kind} | {one + two} | {one} | {two} | 0 |")
    ones = sum(v for (_, c), v in seen.items() if c == 1)
    print(f"| all | {total} | {ones} | {total - ones} | 0 |")


if __name__ == "__main__":
    main()
