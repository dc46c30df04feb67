"""``ftaudit report`` at scale: time and page size at growing run lengths.

Writes valid synth runs (2 cells, one restart, retried steps) of each ``--steps`` size
and runs ``ftaudit report RUN_DIR -o PAGE`` on each, in its own process, recording the
wall and CPU time (``getrusage(RUSAGE_CHILDREN)``), the peak RSS and the page's size.
The results are ratios against the smallest size: the page should stay about the same
size (steps are grouped into at most ``MAX_COLUMNS`` columns), the time should grow no
faster than the run. Run: ``.venv/bin/python benchmarks/report_bench.py [--steps 1000 10000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class ReportCost:
    steps: int
    events: int
    wall_s: float
    cpu_s: float
    page_bytes: int
    peak_rss_mb: float


def _synth(run_dir: Path, steps: int) -> int:
    from ftaudit.synth import SynthConfig, synthesize

    config = SynthConfig(
        steps=steps,
        cells=2,
        ranks=1,
        buffer_size=4096,
        samples_per_step=64,
        restarts=1,
        retries=5,
        checkpoint_every=100,
        flush_every=100,
        seed=0,
    )
    return synthesize(run_dir, config).events


def measure(steps: int, root: Path) -> ReportCost:
    run_dir, page = root / f"run{steps}", root / f"page{steps}.html"
    events = _synth(run_dir, steps)
    argv = [str(BIN / "ftaudit"), "report", str(run_dir), "-o", str(page)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # the largest child so far: sizes run smallest first, so it is this report's peak
    rss = after.ru_maxrss / 1024
    cost = ReportCost(steps, events, wall, cpu, page.stat().st_size, rss)
    print(cost, file=sys.stderr, flush=True)  # a long run shows each size as it ends
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    import duckdb
    import pyarrow

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(n, Path(tmp)) for n in sorted(args.steps)]
    load_after = os.getloadavg()
    base = rows[0]
    meta = (
        f"python {platform.python_version()}, pyarrow {pyarrow.__version__}, duckdb "
        f"{duckdb.__version__}, {platform.machine()}, {platform.system()}, "
        f"{os.cpu_count()} cores, load average {load_before} before, {load_after} after; "
        "synth 2 cells, B = 4,096, 64 samples/step, one restart, 5 retried steps"
    )
    lines = [
        "# ftaudit report at scale",
        "",
        meta,
        "",
        "| steps | events | wall (s) | CPU (s) | CPU / smallest | page (KB) | page / smallest "
        "| peak RSS (MB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.steps:,} | {r.events:,} | {r.wall_s:.1f} | {r.cpu_s:.2f} | "
            f"{r.cpu_s / base.cpu_s:.1f}x | {r.page_bytes / 1024:.0f} | "
            f"{r.page_bytes / base.page_bytes:.2f}x | {r.peak_rss_mb:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report_bench.md").write_text(text)
    (args.out / "report_bench.json").write_text(
        json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1) + "\n"
    )
    print(text)


if __name__ == "__main__":
    main()
