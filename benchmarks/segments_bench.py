"""Many small segments: ``ft-verify`` time and memory against the same events in few segments.

The hooks flush every step per writer, so a long run holds many small segments. For one
run shape, ``ftaudit synth`` writes the same events twice: sealed every ``--few-every``
steps (few segments) and every step (many segments). Then, each command in its own
process (peak RSS from ``getrusage(RUSAGE_CHILDREN)`` of a wrapper whose only child is
the command; CPU is the child's user + system time, which the shared machine's load
affects less than wall time):

- ``ft-verify`` of the few-segment run (the reference);
- ``ft-verify`` of the many-segment run;
- ``ftaudit compact`` of the many-segment run, then ``ft-verify`` of it.

It reports the ratios to the reference. Every verification must exit 0 (both runs are
valid). ``--steps 3000 --cells 2`` gives about 9,000 segments; ``--steps 33000 --cells 2``
about 100,000. ``tests/benchmarks/test_segments_bench.py`` runs a tiny size to keep the
script working (no timing is asserted).

Run: ``.venv/bin/python benchmarks/segments_bench.py --steps 3000 --json OUT.json --md OUT.md``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
FTAUDIT = [sys.executable, "-c", "from ftaudit.cli.app import main; main()"]
FT_VERIFY = [sys.executable, "-c", "from ftaudit.cli.verify_cmd import main; main()"]


def measure(cmd: list[str]) -> dict[str, Any]:
    """Run ``cmd`` under a wrapper process: wall and CPU seconds, peak RSS (MB), exit code."""
    wrapper = [sys.executable, str(HERE), "--measure", json.dumps(cmd)]
    out = subprocess.run(wrapper, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def _measure_child(spec: str) -> None:
    started = time.perf_counter()
    done = subprocess.run(json.loads(spec), capture_output=True, text=True)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        json.dumps(
            {
                "wall_s": time.perf_counter() - started,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "rss_mb": usage.ru_maxrss / 1024,
                "code": done.returncode,
                "stderr": done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else [],
            }
        )
    )


def synth(run: Path, steps: int, cells: int, every: int) -> dict[str, Any]:
    cmd = [*FTAUDIT, "synth", str(run), "--steps", str(steps), "--cells", str(cells)]
    result = measure([*cmd, "--ranks", "1", "--no-fsync", "--flush-every", str(every)])
    result["segments"] = sum(1 for _ in run.glob("events/*/*.parquet"))
    return result


def verify(run: Path) -> dict[str, Any]:
    result = measure([*FT_VERIFY, str(run), "--format", "json", "-o", os.devnull])
    if result["code"] != 0:
        raise SystemExit(f"ft-verify {run} exited {result['code']}: {result['stderr']}")
    return result


def bench(steps: int, cells: int, few_every: int, workdir: Path) -> dict[str, Any]:
    few, many = workdir / "few", workdir / "many"
    out: dict[str, Any] = {"steps": steps, "cells": cells, "few_every": few_every}
    out["synth_few"] = synth(few, steps, cells, few_every)
    out["synth_many"] = synth(many, steps, cells, 1)
    out["verify_few"] = verify(few)
    out["verify_many"] = verify(many)
    out["compact"] = measure([*FTAUDIT, "compact", str(many)])
    out["compacted_segments"] = sum(1 for _ in many.glob("events/*/*.parquet"))
    out["verify_compacted"] = verify(many)
    ref = out["verify_few"]
    for name in ("verify_many", "verify_compacted"):
        out[f"{name}_cpu_ratio"] = out[name]["cpu_s"] / ref["cpu_s"]
        out[f"{name}_wall_ratio"] = out[name]["wall_s"] / ref["wall_s"]
    return out


def machine() -> str:
    import duckdb
    import pyarrow

    cpu = platform.processor() or platform.machine()
    load = os.getloadavg()[0]
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}; Python "
        f"{platform.python_version()}, DuckDB {duckdb.__version__}, pyarrow "
        f"{pyarrow.__version__}; load average at start {load:.1f}"
    )


def markdown(r: dict[str, Any]) -> str:
    def row(label: str, segs: int, m: dict[str, Any], ratio: str) -> str:
        return (
            f"| {label} | {segs:,} | {m['cpu_s']:.1f} | {m['wall_s']:.1f} | "
            f"{m['rss_mb']:.0f} | {ratio} |"
        )

    many, comp = r["verify_many_cpu_ratio"], r["verify_compacted_cpu_ratio"]
    lines = [
        f"Run shape: `ftaudit synth --steps {r['steps']} --cells {r['cells']} --ranks 1 "
        f"--no-fsync`, sealed every {r['few_every']} steps (few) or every step (many).",
        "",
        "| ft-verify of | segments | CPU s | wall s | peak RSS MB | CPU vs few |",
        "|---|---:|---:|---:|---:|---:|",
        row("few segments", r["synth_few"]["segments"], r["verify_few"], "1.0x"),
        row("many segments", r["synth_many"]["segments"], r["verify_many"], f"{many:.1f}x"),
        row(
            "many, after `ftaudit compact`",
            r["compacted_segments"],
            r["verify_compacted"],
            f"{comp:.1f}x",
        ),
        "",
        f"`ftaudit compact` itself: {r['compact']['cpu_s']:.1f} s CPU, "
        f"{r['compact']['wall_s']:.1f} s wall, peak RSS {r['compact']['rss_mb']:.0f} MB.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--measure":
        _measure_child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--few-every", type=int, default=100)
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--md", type=Path, help="write the Markdown table here")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ftaudit-segments-"))
    try:
        result = bench(args.steps, args.cells, args.few_every, workdir)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    result["machine"] = machine()
    text = markdown(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    if args.md:
        args.md.write_text(f"**Machine:** {result['machine']}\n\n{text}")


if __name__ == "__main__":
    main()
