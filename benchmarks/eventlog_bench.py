"""Event log throughput and size against one JSON line per event (the common design today).

Both sides log the same events (a realistic per-step mix: one allocation of 256 samples,
four witness snapshots, one metric with 20 keys) and make them durable at the same
points. Two rounds, timed in one process:

- **events given as objects** (pre-built, validated models): ftaudit ``EventWriter.log``
  for every event; JSON lines ``f.write(event.model_dump_json() + "\\n")``;
- **events given as field values** (what a hook holds before it logs): ftaudit
  ``EventWriter.log_fields`` (checks the values as the model would, builds no model);
  JSON lines builds the model from the same values (the same validation) and dumps it.

On the ftaudit side the writer's flusher thread seals a segment (temp file, fsync, rename,
fsync of the folder) once ``FLUSH_ROWS`` events are buffered, and ``close`` seals the
rest; JSON lines ``flush`` + ``fsync`` after every ``FLUSH_ROWS`` lines and at the end (an
append-only file needs no rename; its folder is fsynced once, when the file is created).
A flush takes what is buffered when it starts, so while the flusher lags behind the
training thread a segment holds more than ``FLUSH_ROWS`` events and ftaudit fsyncs less
often than JSON lines (never more than twice as often): the table counts both sides' fsyncs.

It also reports what the training loop feels: the latency of single ``log`` calls while
the background flusher is writing segments; and the CPU time of all threads per event until
durable, the figure that stays comparable on a loaded machine (wall time there is mostly
waiting for a core).

Then where an event's time goes, each part timed alone on the same events (CPU of the
thread doing it, best of the repeats): ``log()`` and ``log_fields()`` with no flush
running, building the models, the flush's conversion to Arrow (``build_table``, under the
GIL) of objects and of field values, Parquet encoding with each compression and with
the per-column choice segments are written with (off the GIL), and one
``model_dump_json``. The logging call and the conversion both hold the GIL, so no flusher
thread can overlap them: their sum bounds the durable rate from above, whatever the disk
and the second core do.

The table is printed and written to ``benchmarks/results/eventlog_bench.md`` (``--out``).

Run: ``.venv/bin/python benchmarks/eventlog_bench.py [--steps N] [--out DIR]``
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from ftaudit.eventlog.batch import Batch, Rows
from ftaudit.eventlog.codecs import compression as as_written
from ftaudit.eventlog.context import NO_CONTEXT, StepAttempt
from ftaudit.eventlog.hot import KINDS, PAIRED, add
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.segment import PARQUET_OPTIONS
from ftaudit.eventlog.segment_table import build_table

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


@dataclass(frozen=True)
class Fields:
    """One event as a hook holds it before logging: its type and payload field values."""

    model: type[Event]
    values: tuple[Any, ...]
    step: int | None
    attempt: int | None

    def build(self) -> Event:
        names = [
            name for name, _ in default_registry[self.model.model_fields["type"].default].fields
        ]
        return self.model(
            step=self.step, attempt=self.attempt, **dict(zip(names, self.values, strict=True))
        )


def as_fields(events: list[Event]) -> list[Fields]:
    """The same events as field values, in the registry's field order."""
    return [
        Fields(
            type(event),
            tuple(vars(event)[name] for name, _ in default_registry[event.type].fields),
            event.step,
            event.attempt,
        )
        for event in events
    ]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass(frozen=True)
class Run:
    """One timed run of one writer: seconds in the logging calls and until durable, CPU
    seconds of all threads until durable and of the logging thread alone, fsyncs, bytes
    on disk, sampled call latencies."""

    log_s: float
    durable_s: float
    cpu_s: float
    thread_cpu_s: float
    """CPU of the logging (training) thread until its last call returned."""
    fsyncs: int
    """fsync calls until durable: ftaudit two per sealed segment (the file and its
    folder), JSON lines one per ``FLUSH_ROWS`` lines and one for the folder."""
    bytes: int
    latencies: list[float]


def new_writer(root: Path) -> EventWriter:
    return EventWriter(
        root,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="bench",
        incarnation=0,
        options=WriterOptions(flush_rows=FLUSH_ROWS, fsync=True),
    )


def timed_writer(root: Path, log: Callable[[EventWriter, int], object], n: int) -> Run:
    """``log(writer, i)`` for every event ``i``, then ``close``."""
    writer = new_writer(root)
    latencies = []
    cpu = time.process_time()
    thread_cpu = time.thread_time()
    started = time.perf_counter()
    for i in range(n):
        if i % 97 == 0:  # sample single-call latency without timing every call
            t0 = time.perf_counter()
            log(writer, i)
            latencies.append(time.perf_counter() - t0)
        else:
            log(writer, i)
    logged = time.perf_counter()
    thread_cpu = time.thread_time() - thread_cpu
    writer.close()
    durable = time.perf_counter()
    cpu = time.process_time() - cpu
    fsyncs = 2 * (writer.stats.segments_written + writer.stats.rolls)
    return Run(
        logged - started, durable - started, cpu, thread_cpu, fsyncs, dir_bytes(root), latencies
    )


def bench_ftaudit(events: list[Event], root: Path) -> Run:
    return timed_writer(root, lambda writer, i: writer.log(events[i]), len(events))


def bench_ftaudit_fields(fields: list[Fields], root: Path) -> Run:
    def log(writer: EventWriter, i: int) -> None:
        f = fields[i]
        writer.log_fields(f.model, *f.values, step=f.step, attempt=f.attempt)

    return timed_writer(root, log, len(fields))


def bench_ftaudit_built(fields: list[Fields], root: Path) -> Run:
    """The hooks before ``log_fields``: build the model from the values, then ``log`` it."""
    return timed_writer(root, lambda writer, i: writer.log(fields[i].build()), len(fields))


def bench_jsonl(lines: Callable[[int, int], list[str]], n: int, root: Path) -> Run:
    """``lines(start, stop)`` gives the JSON lines of events ``start .. stop-1``."""
    path = root / "events.jsonl"
    cpu = time.process_time()
    started = time.perf_counter()
    fsyncs = 1
    with open(path, "w") as f:
        fsync_dir(root)  # the file's name is durable
        for start in range(0, n, FLUSH_ROWS):
            for line in lines(start, min(n, start + FLUSH_ROWS)):
                f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
            fsyncs += 1
    durable = time.perf_counter()
    elapsed = durable - started
    cpu = time.process_time() - cpu
    return Run(elapsed, elapsed, cpu, cpu, fsyncs, path.stat().st_size, [])


@dataclass(frozen=True)
class Costs:
    """Microseconds of CPU per event of each part, timed alone (best of the repeats)."""

    log: float
    log_in_context: float
    """``log()`` inside ``step_context``, as the hooks call it."""
    log_fields: float
    log_fields_in_context: float
    build: float
    """Building the event models from their field values (what ``log_fields`` spares)."""
    conversion: float
    conversion_fields: float
    encode: dict[str, tuple[float, float]]
    """compression -> (µs per event, bytes per event) of Parquet encoding."""
    json_line: float

    def ceiling(self, jsonl_cpu: float, *, fields: bool) -> float:
        """The durable rate's upper bound against JSON lines (``jsonl_cpu``: µs of CPU per
        event of the whole JSON writer): the GIL-bound parts alone, all else overlapped."""
        if fields:
            return jsonl_cpu / (self.log_fields + self.conversion_fields)
        return jsonl_cpu / (self.log + self.conversion)


def cpu_per_event(fn: Callable[[], object], n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.thread_time()
        fn()
        best = min(best, time.thread_time() - started)
    return best / n * 1e6


def measure_costs(events: list[Event], fields: list[Fields], repeats: int) -> Costs:
    n = len(events)
    source = Trainer(cell_index=0, rank_within_cell=0)
    with tempfile.TemporaryDirectory() as root:
        # a buffer that never fills and never ages: no flush runs while log() is timed
        writer = EventWriter(
            root,
            source,
            run_id="bench",
            incarnation=0,
            options=WriterOptions(
                flush_rows=4 * n * repeats + 1, flush_interval_s=3600, fsync=False
            ),
        )

        def log_all() -> None:
            log = writer.log
            for event in events:
                log(event)

        def log_fields_all() -> None:
            log_fields = writer.log_fields
            for f in fields:
                log_fields(f.model, *f.values, step=f.step, attempt=f.attempt)

        def log_fields_context() -> None:
            # as the hooks log: the step from the context, the values alone
            log_fields = writer.log_fields
            with step_context(0, 0):
                for f in fields:
                    log_fields(f.model, *f.values)

        def in_context(fn: Callable[[], None]) -> Callable[[], None]:
            def run() -> None:
                with step_context(0, 0):  # the events' own steps win; the hooks log like this
                    fn()

            return run

        log_us = cpu_per_event(log_all, n, repeats)
        log_in_context_us = cpu_per_event(in_context(log_all), n, repeats)
        log_fields_us = cpu_per_event(log_fields_all, n, repeats)
        log_fields_in_context_us = cpu_per_event(log_fields_context, n, repeats)
        writer.close()

    def build_all() -> None:
        for f in fields:
            f.build()

    build_us = cpu_per_event(build_all, n, repeats)
    chunks = [range(i, min(n, i + FLUSH_ROWS)) for i in range(0, n, FLUSH_ROWS)]
    batches = [
        Batch([events[i] for i in chunk], array("q", [0] * len(chunk)), [NO_CONTEXT] * len(chunk))
        for chunk in chunks
    ]
    field_batches = [rows_batch(fields, chunk) for chunk in chunks]

    def convert(batches: list[Batch]) -> Callable[[], list[pa.Table]]:
        def run() -> list[pa.Table]:
            return [
                build_table(
                    batch,
                    first_seq=chunk.start,
                    run_id="bench",
                    incarnation=0,
                    writer="bench",
                    source=source,
                    registry=default_registry,
                )[0]
                for batch, chunk in zip(batches, chunks, strict=True)
            ]

        return run

    conversion_us = cpu_per_event(convert(batches), n, repeats)
    conversion_fields_us = cpu_per_event(convert(field_batches), n, repeats)
    tables = convert(batches)()
    if tables != convert(field_batches)():
        raise AssertionError("objects and field values gave different tables")
    encode: dict[str, tuple[float, float]] = {}
    codecs: dict[str, Callable[[pa.Table], Any]] = {
        "none": lambda _: "none",
        "lz4": lambda _: "lz4",
        "zstd": lambda _: "zstd",
        "per column, as segments are written": as_written,
    }
    for compression, codec in codecs.items():
        sizes: list[int] = []

        def encode_all(codec: Callable[[pa.Table], Any] = codec, sizes: list[int] = sizes) -> None:
            sizes.clear()
            for table in tables:
                sink = pa.BufferOutputStream()
                pq.write_table(table, sink, compression=codec(table), **PARQUET_OPTIONS)
                sizes.append(sink.tell())

        encode[compression] = (cpu_per_event(encode_all, n, repeats), sum(sizes) / n)

    def dump_all() -> None:
        for event in events:
            event.model_dump_json()

    return Costs(
        log_us,
        log_in_context_us,
        log_fields_us,
        log_fields_in_context_us,
        build_us,
        conversion_us,
        conversion_fields_us,
        encode,
        cpu_per_event(dump_all, n, repeats),
    )


def rows_batch(fields: list[Fields], chunk: range) -> Batch:
    """A flush of ``chunk``'s events as ``log_fields`` buffers them (events of one step
    share one ``StepAttempt``, as the writer's reuse of the last one passed makes them)."""
    batch = Batch()
    context = NO_CONTEXT
    for i in chunk:
        f = fields[i]
        if (context.step, context.attempt) != (f.step, f.attempt):
            context = StepAttempt(f.step, f.attempt)
        rows = batch.rows.get(f.model)
        if rows is None:
            width = len(f.values) + len(PAIRED.get(f.model, ()))
            rows = batch.rows[f.model] = Rows(width)
        if not add(KINDS[f.model], f.values, rows.values, i, 0, context):
            raise AssertionError(f"{f.model.__name__} values declined")
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    events = make_events(args.steps)
    fields = as_fields(events)
    n = len(events)

    def dumped(start: int, stop: int) -> list[str]:
        return [event.model_dump_json() for event in events[start:stop]]

    def built_and_dumped(start: int, stop: int) -> list[str]:
        return [f.build().model_dump_json() for f in fields[start:stop]]

    load_before = os.getloadavg()[0]
    names = ("obj", "obj_json", "fields", "built", "fields_json")
    rounds: dict[str, list[Run]] = {k: [] for k in names}
    full_passes: dict[str, list[int]] = {k: [] for k in names}
    pass_ms: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(args.repeats):  # interleaved, so both sides see the same load
        for name, run in (
            ("obj", lambda root: bench_ftaudit(events, root)),
            ("obj_json", lambda root: bench_jsonl(dumped, n, root)),
            ("fields", lambda root: bench_ftaudit_fields(fields, root)),
            ("built", lambda root: bench_ftaudit_built(fields, root)),
            ("fields_json", lambda root: bench_jsonl(built_and_dumped, n, root)),
        ):
            with tempfile.TemporaryDirectory() as root:
                # each run starts with the collector's generations empty: a run that
                # promoted many objects (the models ``built`` makes) must not set off a
                # full pass over the benchmark's own objects inside the next one
                gc.collect()
                with full_collections() as passes:
                    result = run(Path(root))
                full_passes[name].append(len(passes))
                pass_ms[name].extend(1e3 * t for t in passes)
                rounds[name].append(result)
    costs = measure_costs(events, fields, args.repeats)
    best = {name: best_of(runs) for name, runs in rounds.items()}
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
        "| events given as | writer | log calls/s (training thread) | events/s until durable "
        "| CPU us/event until durable | of it, training thread | fsyncs | bytes/event |"
    )
    out("|---|---|---:|---:|---:|---:|---:|---:|")
    for given, ft_name, js_name, ft_key, js_key in (
        ("objects", "ftaudit `log(event)`", "JSON lines `model_dump_json`", "obj", "obj_json"),
        (
            "field values",
            "ftaudit `log_fields(type, *values)`",
            "JSON lines: model built, `model_dump_json`",
            "fields",
            "fields_json",
        ),
        (
            "field values",
            "ftaudit `log(type(**values))` (the hooks before `log_fields`)",
            "JSON lines: model built, `model_dump_json`",
            "built",
            "fields_json",
        ),
    ):
        ft, js = best[ft_key], best[js_key]
        out(
            f"| {given} | {ft_name} (Parquet, zstd or lz4 per column, sealed from "
            f"{FLUSH_ROWS:,} buffered) "
            f"| {n / ft.log_s:,.0f} | {n / ft.durable_s:,.0f} | {ft.cpu_s / n * 1e6:.2f} "
            f"| {ft.thread_cpu_s / n * 1e6:.2f} | {ft.fsyncs} | {ft.bytes / n:.1f} |"
        )
        out(
            f"| {given} | {js_name} (fsync every {FLUSH_ROWS:,}) | {n / js.log_s:,.0f} "
            f"| {n / js.durable_s:,.0f} | {js.cpu_s / n * 1e6:.2f} "
            f"| {js.thread_cpu_s / n * 1e6:.2f} | {js.fsyncs} | {js.bytes / n:.1f} |"
        )
        out(
            f"| {given} | **ftaudit / JSON lines** | {js.log_s / ft.log_s:.1f}x "
            f"| **{js.durable_s / ft.durable_s:.2f}x** | {ft.cpu_s / js.cpu_s:.2f}x "
            f"| {ft.thread_cpu_s / js.thread_cpu_s:.2f}x | | 1/{js.bytes / ft.bytes:.1f} |"
        )
    for name, label in (
        ("obj", "log(event)"),
        ("fields", "log_fields()"),
        ("built", "model built + log()"),
    ):
        lat = sorted(x for run in rounds[name] for x in run.latencies)
        p = lambda q, lat=lat: lat[min(len(lat) - 1, int(q * len(lat)))] * 1e6  # noqa: E731
        out(
            f"{label} latency while flushing: p50 {p(0.5):.1f} us, p99 {p(0.99):.1f} us, "
            f"max {lat[-1] * 1e6:.0f} us, mean {statistics.fmean(lat) * 1e6:.1f} us"
        )
    out(
        "fsyncs per round: "
        + "; ".join(
            f"{name} {[run.fsyncs for run in rounds[name]]}" for name in ("fields", "fields_json")
        )
    )
    out(
        "full collections inside each run (the collector's pass over every live object): "
        + "; ".join(
            f"{name} {full_passes[name]}"
            + (f" ({max(pass_ms[name]):.0f} ms at most)" if pass_ms[name] else "")
            for name in names
        )
    )
    out(f"load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after (2 shared cores)")
    out("")
    out("Where an event's time goes (CPU us per event, each part timed alone):")
    out("")
    out("| part | us/event | holds the GIL |")
    out("|---|---:|---|")
    out(f"| `log(event)`, no flush running | {costs.log:.2f} | yes |")
    out(f"| the same inside `step_context` (as hooks logged) | {costs.log_in_context:.2f} | yes |")
    out(f"| `log_fields(type, *values, step=, attempt=)` | {costs.log_fields:.2f} | yes |")
    out(
        f"| `log_fields(type, *values)` inside `step_context` (as the hooks log) "
        f"| {costs.log_fields_in_context:.2f} | yes |"
    )
    out(f"| building the models from the values (log_fields spares it) | {costs.build:.2f} | yes |")
    out(f"| flush: conversion to Arrow of objects (`build_table`) | {costs.conversion:.2f} | yes |")
    out(f"| flush: conversion to Arrow of field values | {costs.conversion_fields:.2f} | yes |")
    for compression, (us, size) in costs.encode.items():
        out(f"| flush: Parquet encoding, {compression} ({size:.1f} bytes/event) | {us:.2f} | no |")
    out(f"| JSON line: `model_dump_json` | {costs.json_line:.2f} | yes |")
    for given, key, fields_path, js in (
        ("objects", "log() and its conversion", False, best["obj_json"]),
        ("field values", "log_fields() and its conversion", True, best["fields_json"]),
    ):
        out(
            f"Ceiling ({given}): {key} hold the GIL, so the durable rate is at most "
            f"{costs.ceiling(js.cpu_s / n * 1e6, fields=fields_path):.2f}x that of JSON lines "
            f"({js.cpu_s / n * 1e6:.2f} us of CPU per event) however the rest overlaps."
        )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "eventlog_bench.md").write_text(text)


@contextmanager
def full_collections() -> Iterator[list[float]]:
    """The durations (s) of the full (generation 2) collections that ran inside the block."""
    passes: list[float] = []
    started = [0.0]

    def watch(phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            passes.append(time.perf_counter() - started[0])

    gc.callbacks.append(watch)
    try:
        yield passes
    finally:
        gc.callbacks.remove(watch)


def best_of(runs: list[Run]) -> Run:
    """Each figure's best over the runs (its least disturbed one)."""
    return Run(
        min(r.log_s for r in runs),
        min(r.durable_s for r in runs),
        min(r.cpu_s for r in runs),
        min(r.thread_cpu_s for r in runs),
        min(r.fsyncs for r in runs),
        runs[0].bytes,
        [],
    )


if __name__ == "__main__":
    main()
