"""Every byte of a segment, one bit flipped at a time: ft-verify must exit 1 or 2 on each.

Exhaustive where the hypothesis fuzzing (``fuzz_readers.py``) samples: for each byte of
one segment of a clean run, flip one bit (bit ``offset % 8``) in a fresh copy and judge it
with ``ft-verify`` (in-process). Prints how many flips gave exit 1 and exit 2.

Run: ``.venv/bin/python benchmarks/torture/bitflip_sweep.py [--segment -1]``
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root

from tests.support.cli_runs import write_run
from tests.support.corrupt import BadVerdict, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segment", type=int, default=-1, help="index among the segments")
    args = parser.parse_args()
    started = time.perf_counter()
    seen: Counter[int] = Counter()
    with tempfile.TemporaryDirectory(prefix="ftaudit-sweep-") as scratch:
        base = write_run(Path(scratch) / "base")
        rel = sorted(p.relative_to(base) for p in base.glob("events/*/*.parquet"))[args.segment]
        original = (base / rel).read_bytes()
        run = Path(scratch) / "run"
        for offset in range(len(original)):
            shutil.rmtree(run, ignore_errors=True)
            shutil.copytree(base, run)
            data = bytearray(original)
            data[offset] ^= 1 << (offset % 8)
            (run / rel).write_bytes(bytes(data))
            if offset % 500 == 499:
                print(f"  {offset + 1} bytes: {dict(seen)}", flush=True)
            try:
                seen[verdict(run).code] += 1
            except BadVerdict as exc:
                seen[-1] += 1
                print(f"FAILED at byte {offset}: {str(exc).splitlines()[0]}", flush=True)
                print("\n".join(str(exc).splitlines()[1:]), flush=True)
    print(
        f"# bitflip_sweep: {rel} ({len(original)} bytes), one flip per byte, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(
        f"exit 1: {seen[1]}, exit 2: {seen[2]}, bad verdicts: {seen[-1]}, "
        f"total {sum(seen.values())}"
    )
    sys.exit(1 if seen[-1] else 0)


if __name__ == "__main__":
    main()
