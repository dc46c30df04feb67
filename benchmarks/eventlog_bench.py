"""Event log throughput and size against one JSON line per event (the common design today).

Both sides get the same pre-built event objects (a realistic per-step mix: one allocation
of 256 samples, four witness snapshots, one metric with 20 keys). Timed, in one process:

- ftaudit: ``EventWriter.log`` for every event, then ``close`` (the last flush, fsync on);
- JSON lines: ``f.write(event.model_dump_json() + "\\n")`` for every event, then fsync.

It also reports what the training loop feels: the latency of single ``log`` calls while
the background flusher is writing segments; and the CPU time of all threads per event until
durable, the figure that stays comparable on a loaded machine (wall time there is mostly
waiting for a core).

The table is printed and written to ``benchmarks/results/eventlog_bench.md`` (``--out``).

Run: ``.venv/bin/python benchmarks/eventlog_bench.py [--steps N] [--out DIR]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow

from ftaudit.eventlog import (
    Event,
    EventWriter,
    IntRuns,
    Metric,
    Trainer,
    WitnessAllocated,
    WitnessSnapshot,
    WriterOptions,
)

B = 65_536
SAMPLES = 256
KEEP = int(0.7 * B)


def make_events(steps: int) -> list[Event]:
    events: list[Event] = []
    for step in range(steps):
        start = step * SAMPLES
        after = start + SAMPLES
        stale = IntRuns.arc(after % B, B - min(KEEP, after, B), B)
        events.append(
            WitnessAllocated(
                step=step,
                attempt=0,
                num_ids=SAMPLES,
                counter_after=after,
                witness_ids=IntRuns.arc(start, SAMPLES, B),
                sample_indices=IntRuns.arc(start, SAMPLES, 1 << 40),
                stale_ids=stale,
            )
        )
        active = IntRuns.arc(max(0, after - KEEP), min(KEEP, after), B)
        for cell in range(2):
            for instance in ("chunk0.head", "chunk0.tail"):
                events.append(
                    WitnessSnapshot(
                        step=step,
                        attempt=0,
                        cell=cell,
                        instance=instance,
                        nonzero_ids=active,
                        stale_ids=stale,
                    )
                )
        events.append(
            Metric(step=step, attempt=0, values={f"m{k:02d}": step * 0.001 * k for k in range(20)})
        )
    return events


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def bench_ftaudit(events: list[Event], root: Path) -> tuple[float, float, float, int, list[float]]:
    """Returns (seconds in log calls, seconds until everything is durable, CPU seconds of
    all threads until then, bytes, latencies)."""
    writer = EventWriter(
        root,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="bench",
        incarnation=0,
        options=WriterOptions(flush_rows=8192, fsync=True),
    )
    latencies = []
    cpu = time.process_time()
    started = time.perf_counter()
    for i, event in enumerate(events):
        if i % 97 == 0:  # sample single-call latency without timing every call
            t0 = time.perf_counter()
            writer.log(event)
            latencies.append(time.perf_counter() - t0)
        else:
            writer.log(event)
    logged = time.perf_counter()
    writer.close()
    durable = time.perf_counter()
    cpu = time.process_time() - cpu
    return logged - started, durable - started, cpu, dir_bytes(root), latencies


def bench_jsonl(events: list[Event], root: Path) -> tuple[float, float, int]:
    """Returns (seconds until everything is durable, CPU seconds, bytes)."""
    path = root / "events.jsonl"
    cpu = time.process_time()
    started = time.perf_counter()
    with open(path, "w") as f:
        for event in events:
            f.write(event.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
    durable = time.perf_counter()
    return durable - started, time.process_time() - cpu, path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    events = make_events(args.steps)
    n = len(events)
    results = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ft_log_s, ft_s, ft_cpu, ft_bytes, lat = bench_ftaudit(events, Path(a))
            js_s, js_cpu, js_bytes = bench_jsonl(events, Path(b))
            results.append((ft_log_s, ft_s, ft_cpu, ft_bytes, js_s, js_cpu, js_bytes, lat))
    ft_log_s, ft_s, ft_cpu = (min(r[i] for r in results) for i in range(3))
    js_s, js_cpu = (min(r[i] for r in results) for i in (4, 5))
    ft_bytes, js_bytes = results[0][3], results[0][6]
    lat = sorted(x for r in results for x in r[7])
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6  # noqa: E731
    lines: list[str] = []
    out = lines.append  # the table goes to stdout and to the results file
    out(
        f"# eventlog_bench: {n:,} events ({args.steps:,} steps x 6), B={B:,}, best of "
        f"{args.repeats}"
    )
    out(
        f"# python {platform.python_version()}, pyarrow {pyarrow.__version__}, "
        f"duckdb {duckdb.__version__}, {os.cpu_count()} cpus, {platform.machine()}"
    )
    out(
        "| writer | log() calls/s (training thread) | events/s until durable "
        "| CPU us/event until durable | bytes/event |"
    )
    out("|---|---:|---:|---:|---:|")
    out(
        f"| ftaudit EventWriter (Parquet, zstd, fsync) | {n / ft_log_s:,.0f} | {n / ft_s:,.0f} "
        f"| {ft_cpu / n * 1e6:.2f} | {ft_bytes / n:.1f} |"
    )
    out(
        f"| JSON lines (model_dump_json) | {n / js_s:,.0f} | {n / js_s:,.0f} "
        f"| {js_cpu / n * 1e6:.2f} | {js_bytes / n:.1f} |"
    )
    out(
        f"| ftaudit / JSON lines | {js_s / ft_log_s:.1f}x | {js_s / ft_s:.2f}x "
        f"| {ft_cpu / js_cpu:.2f}x | 1/{js_bytes / ft_bytes:.1f} |"
    )
    out(
        f"log() latency: p50 {p(0.5):.1f} us, p99 {p(0.99):.1f} us, "
        f"max {lat[-1] * 1e6:.0f} us, mean {statistics.fmean(lat) * 1e6:.1f} us"
    )
    out(f"load average: {os.getloadavg()[0]:.1f} (shared machine)")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eventlog_bench.md").write_text(text)


if __name__ == "__main__":
    main()
