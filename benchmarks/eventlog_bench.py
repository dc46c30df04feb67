"""Event log throughput and size against one JSON line per event (the common design today).

Both sides get the same pre-built event objects (a realistic per-step mix: one allocation
of 256 samples, four witness snapshots, one metric with 20 keys) and the same durability:
made durable at the same points. Timed, in one process:

- ftaudit: ``EventWriter.log`` for every event, then ``close``. The writer's flusher thread
  seals a segment (temp file, fsync, rename, fsync of the folder) each time ``FLUSH_ROWS``
  events are buffered, and ``close`` seals the rest;
- JSON lines: ``f.write(event.model_dump_json() + "\\n")`` for every event, with
  ``flush`` + ``fsync`` after every ``FLUSH_ROWS`` lines and at the end (an append-only
  file needs no rename; its folder is fsynced once, when the file is created).

It also reports what the training loop feels: the latency of single ``log`` calls while
the background flusher is writing segments; and the CPU time of all threads per event until
durable, the figure that stays comparable on a loaded machine (wall time there is mostly
waiting for a core).

Then where an event's time goes, each part timed alone on the same events (CPU of the
thread doing it, best of the repeats): ``log()`` with no flush running, the flush's
conversion to Arrow (``build_table``, under the GIL), Parquet encoding with each
compression (off the GIL), and one ``model_dump_json``. ``log()`` and the conversion
both hold the GIL, so no flusher thread can overlap them: their sum bounds the durable
rate from above, whatever the disk and the second core do.

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
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog import (
    Event,
    EventWriter,
    IntRuns,
    Metric,
    Trainer,
    WitnessAllocated,
    WitnessSnapshot,
    WriterOptions,
    step_context,
)
from ftaudit.eventlog.atomic import fsync_dir
from ftaudit.eventlog.context import NO_CONTEXT
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.segment import PARQUET_OPTIONS, Batch, build_table

B = 65_536
SAMPLES = 256
KEEP = int(0.7 * B)
FLUSH_ROWS = 8192
"""Both writers make their events durable every this many events (and at the end)."""


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
        options=WriterOptions(flush_rows=FLUSH_ROWS, fsync=True),
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
        fsync_dir(root)  # the file's name is durable
        for start in range(0, len(events), FLUSH_ROWS):
            for event in events[start : start + FLUSH_ROWS]:
                f.write(event.model_dump_json() + "\n")
            f.flush()
            os.fsync(f.fileno())
    durable = time.perf_counter()
    return durable - started, time.process_time() - cpu, path.stat().st_size


@dataclass(frozen=True)
class Costs:
    """Microseconds of CPU per event of each part, timed alone (best of the repeats)."""

    log: float
    log_in_context: float
    """``log()`` inside ``step_context``, as the hooks call it."""
    conversion: float
    encode: dict[str, tuple[float, float]]
    """compression -> (µs per event, bytes per event) of Parquet encoding."""
    json_line: float

    def ceiling(self, jsonl_cpu: float) -> float:
        """The durable rate's upper bound against JSON lines (``jsonl_cpu``: µs of CPU per
        event of the whole JSON writer): the GIL-bound parts alone, all else overlapped."""
        return jsonl_cpu / (self.log + self.conversion)


def cpu_per_event(fn: Callable[[], object], n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        fn()
        best = min(best, time.thread_time() - started)
    return best / n * 1e6


def measure_costs(events: list[Event], repeats: int) -> Costs:
    n = len(events)
    source = Trainer(cell_index=0, rank_within_cell=0)
    with tempfile.TemporaryDirectory() as root:
        # a buffer that never fills and never ages: no flush runs while log() is timed
        writer = EventWriter(
            root,
            source,
            run_id="bench",
            incarnation=0,
            options=WriterOptions(flush_rows=n * repeats + 1, flush_interval_s=3600, fsync=False),
        )

        def log_all() -> None:
            log = writer.log
            for event in events:
                log(event)

        log_us = cpu_per_event(log_all, n, repeats)

        def log_all_in_context() -> None:
            with step_context(0, 0):  # the events' own steps win; the hooks log like this
                log_all()

        log_in_context_us = cpu_per_event(log_all_in_context, n, repeats)
        writer.close()
    chunks = [events[i : i + FLUSH_ROWS] for i in range(0, n, FLUSH_ROWS)]
    batches = [
        Batch(chunk, array("q", [0] * len(chunk)), [NO_CONTEXT] * len(chunk)) for chunk in chunks
    ]

    def convert_all() -> list[pa.Table]:
        return [
            build_table(
                batch,
                first_seq=0,
                run_id="bench",
                incarnation=0,
                writer="bench",
                source=source,
                registry=default_registry,
            )[0]
            for batch in batches
        ]

    conversion_us = cpu_per_event(convert_all, n, repeats)
    tables = convert_all()
    encode: dict[str, tuple[float, float]] = {}
    for compression in ("none", "lz4", "zstd"):
        options = {**PARQUET_OPTIONS, "compression": compression}
        sizes: list[int] = []

        def encode_all(options: dict = options, sizes: list[int] = sizes) -> None:
            sizes.clear()
            for table in tables:
                sink = pa.BufferOutputStream()
                pq.write_table(table, sink, **options)
                sizes.append(sink.tell())

        encode[compression] = (cpu_per_event(encode_all, n, repeats), sum(sizes) / n)

    def dump_all() -> None:
        for event in events:
            event.model_dump_json()

    return Costs(
        log_us, log_in_context_us, conversion_us, encode, cpu_per_event(dump_all, n, repeats)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    events = make_events(args.steps)
    n = len(events)
    load_before = os.getloadavg()[0]
    results = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            ft_log_s, ft_s, ft_cpu, ft_bytes, lat = bench_ftaudit(events, Path(a))
            js_s, js_cpu, js_bytes = bench_jsonl(events, Path(b))
            results.append((ft_log_s, ft_s, ft_cpu, ft_bytes, js_s, js_cpu, js_bytes, lat))
    costs = measure_costs(events, args.repeats)
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
        f"# python {platform.python_version()}, pyarrow {pa.__version__}, "
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
        f"| JSON lines (model_dump_json, fsync every {FLUSH_ROWS:,}) | {n / js_s:,.0f} "
        f"| {n / js_s:,.0f} "
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
    out(f"load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 shared cores)")
    out("")
    out("Where an event's time goes (CPU us per event, each part timed alone):")
    out("")
    out("| part | us/event | holds the GIL |")
    out("|---|---:|---|")
    out(f"| `log()`, no flush running | {costs.log:.2f} | yes |")
    out(f"| the same inside `step_context` (as the hooks log) | {costs.log_in_context:.2f} | yes |")
    out(f"| flush: conversion to Arrow (`build_table`) | {costs.conversion:.2f} | yes |")
    for compression, (us, size) in costs.encode.items():
        out(f"| flush: Parquet encoding, {compression} ({size:.1f} bytes/event) | {us:.2f} | no |")
    out(f"| JSON line: `model_dump_json` | {costs.json_line:.2f} | yes |")
    out(
        f"Ceiling: `log()` and the conversion hold the GIL, so the durable rate is at most "
        f"{costs.ceiling(js_cpu / n * 1e6):.2f}x that of JSON lines ({js_cpu / n * 1e6:.2f} "
        "us of CPU per event) however the rest overlaps."
    )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eventlog_bench.md").write_text(text)


if __name__ == "__main__":
    main()
