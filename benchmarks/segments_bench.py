"""Many small segments: ``ft-verify`` time and memory against the same events in few segments.

The hooks flush every step per writer, so a long run seals one small segment per step per
process. For one run shape, ``ftaudit synth`` writes the same events (same seed) as:

- ``few``: sealed every ``--few-every`` steps (about 100 segments: the reference);
- ``many``: sealed every step, rolling off (``--roll-segments 0``): one file per flush, what
  a writer without rolling leaves;
- ``rolled``: sealed every step by the default writer, which rolls every 256 small
  segments into one merged segment as it goes (``WriterOptions.roll_segments``;
  ``--roll-segments`` here overrides it);
- ``compacted``: the ``many`` run after ``ftaudit compact``.

Each command runs in its own process under a wrapper (peak RSS from
``getrusage(RUSAGE_CHILDREN)`` of a wrapper whose only child is the command; CPU is the
child's user + system time of all threads, which the shared machine's load affects less
than wall time). Every verification must exit 0 (the runs are valid). It reports each
case's ratios to ``few``. A case's results go into the ``--json`` file as soon as it is
measured; ``--resume`` keeps the cases that file holds already (same run shape) and
measures only the others, so a long measurement can be taken in parts in one ``--workdir``.
``--steps 11000 --cells 2`` gives about 33,000 segments in ``many``; ``--steps 33000``
about 100,000. ``tests/benchmarks/test_segments_bench.py`` runs a tiny size to keep the
script working (no timing is asserted).

Run: ``.venv/bin/python benchmarks/segments_bench.py --steps 11000 --few-every 500
--workdir DIR --json OUT.json --md OUT.md``
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


CASES = ("few", "many", "rolled", "compacted")


def count(run: Path) -> dict[str, int]:
    """Segments the verifier reads (the listing) and segment files on disk."""
    from ftaudit.eventlog import list_segments

    listing = list_segments(run)
    return {"segments": len(listing), "files": len(listing) + len(listing.covered)}


def synth(run: Path, args: argparse.Namespace, every: int, roll: int | None) -> dict[str, Any]:
    """Write the run (its measurement kept beside it: a later call reuses both)."""
    kept = run.with_name(f"{run.name}.synth.json")
    if run.exists() and kept.exists():
        return json.loads(kept.read_text())
    cmd = [*FTAUDIT, "synth", str(run), "--steps", str(args.steps), "--cells", str(args.cells)]
    cmd += ["--ranks", "1", "--no-fsync", "--flush-every", str(every)]
    if roll is not None:
        cmd += ["--roll-segments", str(roll)]
    made = {**measure(cmd), "measured_at": time.ctime(), "load_at_start": os.getloadavg()[0]}
    kept.write_text(json.dumps(made) + "\n")
    return made


def verify(run: Path) -> dict[str, Any]:
    result = measure([*FT_VERIFY, str(run), "--format", "json", "-o", os.devnull])
    if result["code"] != 0:
        raise SystemExit(f"ft-verify {run} exited {result['code']}: {result['stderr']}")
    return result


def case(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Write (or compact) the case's run, count its segments, verify it."""
    if name == "compacted":
        run = workdir / "many"
        made = {"compact": measure([*FTAUDIT, "compact", str(run)])}
    else:
        run = workdir / name
        every = args.few_every if name == "few" else 1
        roll = args.roll_segments if name == "rolled" else 0
        made = {"synth": synth(run, args, every, roll)}
    return {**made, **count(run), "verify": verify(run)}


def ratios(result: dict[str, Any]) -> None:
    ref = result["cases"]["few"]["verify"]
    for out in result["cases"].values():
        out["cpu_ratio"] = out["verify"]["cpu_s"] / ref["cpu_s"]
        out["wall_ratio"] = out["verify"]["wall_s"] / ref["wall_s"]


def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    shape = {"steps": args.steps, "cells": args.cells, "few_every": args.few_every}
    result: dict[str, Any] = {**shape, "cases": {}}
    if args.resume and args.json and args.json.exists():
        earlier = json.loads(args.json.read_text())
        if {k: earlier.get(k) for k in shape} != shape:
            raise SystemExit(f"{args.json} holds another run shape: {earlier}")
        result = earlier
    for name in args.cases.split(","):
        if name not in CASES:
            raise SystemExit(f"unknown case {name!r}; cases: {', '.join(CASES)}")
        if name in result["cases"]:
            continue
        load = os.getloadavg()[0]
        measured = {"measured_at": time.ctime(), "load_at_start": load}
        result["cases"][name] = {**case(name, args, workdir), **measured}
        result["cases"][name]["load_at_end"] = os.getloadavg()[0]
        if args.json:  # each case as soon as it is measured: a long run can be resumed
            args.json.write_text(json.dumps(result, indent=2) + "\n")
    ratios(result)
    return result


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


def load(c: dict[str, Any]) -> str:
    at, end = c.get("load_at_start"), c.get("load_at_end")
    if at is None:
        return ""
    return f", load average {at:.1f} at its start" + (
        "" if end is None else f", {end:.1f} at its end"
    )


def markdown(r: dict[str, Any]) -> str:
    labels = {
        "few": f"few segments (sealed every {r['few_every']} steps)",
        "many": "many: one segment per flush, rolling off",
        "rolled": "rolled: one flush per step, the default writer",
        "compacted": "many, after `ftaudit compact`",
    }
    lines = [
        f"Run shape: `ftaudit synth --steps {r['steps']} --cells {r['cells']} --ranks 1 "
        "--no-fsync`, the same events in each case.",
        "",
        "| ft-verify of | segments read | files | CPU s | wall s | peak RSS MB | CPU vs few |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in r["cases"].items():
        m = c["verify"]
        lines.append(
            f"| {labels[name]} | {c['segments']:,} | {c['files']:,} | {m['cpu_s']:.1f} | "
            f"{m['wall_s']:.1f} | {m['rss_mb']:.0f} | {c['cpu_ratio']:.2f}x |"
        )
    lines.append("")
    for name, c in r["cases"].items():
        made = c.get("synth") or c["compact"]
        what = "`ftaudit compact`" if "compact" in c else "synth"
        lines.append(
            f"- {name}: {what} {made['cpu_s']:.1f} s CPU, {made['wall_s']:.1f} s wall, "
            f"peak RSS {made['rss_mb']:.0f} MB (measured {c['measured_at']}{load(c)})"
        )
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
    parser.add_argument(
        "--roll-segments", type=int, help="the rolled case's roll (default: the writer's)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the cases the --json file holds already"
    )
    parser.add_argument("--cases", default=",".join(CASES), help="which cases, comma-separated")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ftaudit-segments-"))
    try:
        result = bench(args, workdir)
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
