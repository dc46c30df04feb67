"""Verifier scale: ``ft-verify`` time and peak memory as a run grows, against the common design.

For each size, ``ftaudit synth`` writes a valid run (2 restarts, 5 retried steps, two
snapshot instances per rank, four checksummed tensors), then, each in its own process:

- ``ft-verify RUN_DIR`` (the real entry point): wall time and peak RSS;
- ``ft-verify RUN_DIR --since-step N-1`` (incremental: what a trainer gating its last
  step pays);
- a bare DuckDB scan of the same segments (``CREATE TABLE AS SELECT * FROM
  read_parquet(...)``): how near the I/O floor ``ft-verify`` is;
- the JSON-lines baseline (the common design today): the same run written as one JSON
  line per event with plain id lists, parsed with pydantic, and checked by a
  straightforward witness rule over Python sets, with a 10-minute timeout. Sizes whose
  JSON would exceed ``--json-limit-gb`` are not written (the table says how big it would be).

Peak RSS is measured around each command by a small wrapper process whose only child
is that command (``resource.getrusage(RUSAGE_CHILDREN)``), so sizes never pollute each
other. Run: ``.venv/bin/python benchmarks/verify_bench.py [--quick] [--plot PNG]``.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

BASELINE_TIMEOUT_S = 600
HERE = Path(__file__).resolve()
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Size:
    steps: int
    cells: int
    B: int
    S: int

    @property
    def label(self) -> str:
        return f"{self.steps} x {self.cells} x B={self.B:,} x S={self.S:,}"


FULL: tuple[Size, ...] = (
    Size(100, 2, 4_096, 512),
    Size(100, 16, 4_096, 512),
    Size(1_000, 16, 4_096, 512),
    Size(100, 2, 65_536, 4_096),
    Size(1_000, 16, 65_536, 4_096),
    Size(100, 16, 1_048_576, 4_096),
    Size(1_000, 2, 1_048_576, 4_096),
    Size(1_000, 4, 1_048_576, 4_096),
    Size(1_000, 8, 1_048_576, 4_096),
    Size(1_000, 16, 1_048_576, 4_096),
    Size(10_000, 16, 1_048_576, 4_096),
)
QUICK: tuple[Size, ...] = (Size(100, 2, 4_096, 512), Size(200, 4, 65_536, 4_096))


# -- measuring a command in its own process -------------------------------------------------
def measure(cmd: list[str], timeout: float | None = None) -> dict[str, Any]:
    """Run ``cmd`` under a wrapper process; wall seconds, peak RSS (MB), exit code, stdout."""
    wrapper = [sys.executable, str(HERE), "--measure", json.dumps({"cmd": cmd, "timeout": timeout})]
    out = subprocess.run(wrapper, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def _measure_child(spec: str) -> None:
    args = json.loads(spec)
    started = time.perf_counter()
    try:
        done = subprocess.run(args["cmd"], capture_output=True, text=True, timeout=args["timeout"])
        code, stdout, timed_out = done.returncode, done.stdout, False
    except subprocess.TimeoutExpired:
        code, stdout, timed_out = -1, "", True
    seconds = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss = usage.ru_maxrss / 1024  # KiB -> MiB
    tail = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_s": usage.ru_utime + usage.ru_stime,
                "rss_mb": rss,
                "code": code,
                "timed_out": timed_out,
                "last_line": tail,
            }
        )
    )


# -- the bare scan ------------------------------------------------------------------------
def listed_segments(run_dir: str | Path) -> list[Path]:
    """The segments ``ft-verify`` reads: the run's listing, without the originals that a
    merged segment holds (a glob of ``events/*/*.parquet`` read those too: 975 files and
    1.31x the rows of the 10,000-step run, where ``ft-verify`` reads 357)."""
    from ftaudit.eventlog.rundir import list_segments

    return [f.path for f in list_segments(run_dir).files]


def _scan_child(run_dir: str) -> None:
    import duckdb

    files = [str(p) for p in listed_segments(run_dir)]
    with duckdb.connect(":memory:") as con:
        rel = con.sql(
            "SELECT * FROM read_parquet(?, union_by_name = true, filename = true)", params=[files]
        )
        rel.to_table("t")
        n = con.sql("SELECT count(*) FROM t").fetchall()[0][0]
    print(json.dumps({"rows": n}))


# -- the JSON-lines baseline: the common design ----------------------------------------------
def write_jsonl(run_dir: Path, out: Path) -> int:
    """The run as one JSON line per event, id sets as plain lists. Returns bytes written."""
    from ftaudit.eventlog import IntRuns, read_records

    def plain(value: Any) -> Any:
        if isinstance(value, IntRuns):
            return value.to_list()
        if isinstance(value, BaseModel):
            return {k: plain(getattr(value, k)) for k in type(value).model_fields}
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value.value if hasattr(value, "value") and not isinstance(value, int) else value

    with open(out, "w") as f:
        for r in read_records(run_dir):
            line = {
                "incarnation": r.envelope.incarnation,
                "writer": r.envelope.writer,
                "seq": r.envelope.seq,
                **plain(r.event),
            }
            f.write(json.dumps(line) + "\n")
    return out.stat().st_size


def jsonl_bytes_estimate(run_dir: Path) -> int:
    """About how many bytes the JSON lines would take (ids at ~8 bytes each)."""
    import duckdb

    files = [str(p) for p in listed_segments(run_dir)]
    with duckdb.connect(":memory:") as con:
        row = con.sql(
            """SELECT count(*) AS n,
                      sum(list_sum(coalesce("witness_snapshot.nonzero_ids".lengths, [0]))
                        + list_sum(coalesce("witness_snapshot.stale_ids".lengths, [0]))
                        + list_sum(coalesce("witness_allocated.stale_ids".lengths, [0]))
                        + 2 * coalesce("witness_allocated.num_ids", 0)) AS ids
               FROM read_parquet(?, union_by_name = true)""",
            params=[files],
        ).fetchall()[0]
    return int(row[0]) * 300 + int(row[1] or 0) * 8


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    incarnation: int
    writer: str
    seq: int
    step: int | None = None
    attempt: int | None = None


class _Allocated(_Loose):
    num_ids: int
    counter_after: int
    witness_ids: list[int]
    sample_indices: list[int]
    stale_ids: list[int]


class _Snapshot(_Loose):
    cell: int
    instance: str
    nonzero_ids: list[int]
    stale_ids: list[int]


class _Cell(BaseModel):
    errored: bool = False
    ranks: list[str] = []


class _StepEnd(_Loose):
    accepted_attempt: int
    cells: dict[int, _Cell]


class _Resume(BaseModel):
    iteration: int
    incarnation: int


class _Started(_Loose):
    buffer_size: int
    resumed_from: _Resume | None = None


_MODELS: dict[str, type[_Loose]] = {
    "witness_allocated": _Allocated,
    "witness_snapshot": _Snapshot,
    "step_end": _StepEnd,
    "run_started": _Started,
}


def _baseline_child(path: str) -> None:
    """The witness rule as it is commonly written: parse everything, then Python sets."""
    events: list[_Loose] = []
    with open(path) as f:
        for line in f:
            raw = json.loads(line)
            events.append(_MODELS.get(raw["type"], _Loose).model_validate(raw))
    starts = {e.incarnation: e for e in events if isinstance(e, _Started)}
    # committed history: the final incarnation back through the checkpoints it resumed from
    ranges: dict[int, tuple[int, int | None]] = {}
    inc: int | None = max(starts)
    upto: int | None = None
    while inc is not None:
        ref = starts[inc].resumed_from
        ranges[inc] = (ref.iteration if ref else -1, upto)
        upto, inc = (ref.iteration, ref.incarnation) if ref else (None, None)
    committed: dict[tuple[int, int, int], _StepEnd] = {}
    for e in events:
        if isinstance(e, _StepEnd) and e.incarnation in ranges and e.step is not None:
            lo, hi = ranges[e.incarnation]
            if e.step > lo and (hi is None or e.step <= hi):
                committed[(e.incarnation, e.step, e.accepted_attempt)] = e
    snapshots: dict[tuple[int, int, int], list[_Snapshot]] = {}
    for e in events:
        if isinstance(e, _Snapshot):
            snapshots.setdefault((e.incarnation, e.step or 0, e.attempt or 0), []).append(e)
    allocations = sorted(
        (e for e in events if isinstance(e, _Allocated)), key=lambda a: (a.incarnation, a.seq)
    )
    expected: set[int] = set()  # slots whose most recent allocation is committed
    violations = checked = 0
    for a in allocations:
        key = (a.incarnation, a.step or 0, a.attempt or 0)
        if key in committed:
            expected.update(a.witness_ids)
        else:
            expected.difference_update(a.witness_ids)
        end = committed.get(key)
        if end is None or a.num_ids == 0:
            continue
        normal = {
            c
            for c, o in end.cells.items()
            if not o.errored and o.ranks and all(r == "normal" for r in o.ranks)
        }
        for s in snapshots.get(key, []):
            if s.cell not in normal:
                continue
            stale = set(s.stale_ids)
            observed = set(s.nonzero_ids) - stale
            want = expected - stale
            checked += 1
            violations += bool(want - observed) + bool(observed - want)
    print(json.dumps({"checked": checked, "violations": violations}))


# -- the benchmark --------------------------------------------------------------------------
def bench_size(size: Size, root: Path, json_limit: float, rounds: int = 1) -> dict[str, Any]:
    """Measure one size; a run already in ``root / "run"`` (``--workdir``) is reused.

    With ``rounds`` > 1 the full verification and the bare scan are measured that many
    times, alternating, and every round is kept (``rounds`` in the row): on a shared
    machine one pair of numbers says little.
    """
    from ftaudit.synth import SynthConfig, synthesize

    run = root / "run"
    config = SynthConfig(
        steps=size.steps,
        cells=size.cells,
        ranks=1,
        buffer_size=size.B,
        samples_per_step=size.S,
        restarts=2,
        retries=5,
        flush_every=100,
        seed=1,
    )
    written = root / "synth.json"
    if not written.exists():
        synth = synthesize(run, config)
        made = {"events": synth.events, "seconds": synth.seconds, "eps": synth.events_per_second}
        written.write_text(json.dumps({"config": size.__dict__, **made}))
    made = json.loads(written.read_text())
    assert made.get("config") == size.__dict__, f"{root} holds a run of another size"
    files = listed_segments(run)
    row: dict[str, Any] = {
        "size": size.__dict__,
        "events": made["events"],
        "segments": len(files),
        "disk_mb": sum(f.stat().st_size for f in files) / 2**20,
        "synth_s": made["seconds"],
        "synth_eps": made["eps"],
        "load_avg": os.getloadavg()[0],
    }
    measured = []
    for _ in range(rounds):
        scan = measure([sys.executable, str(HERE), "--scan", str(run)])
        verify = measure([str(BIN / "ft-verify"), str(run), "--format", "json", "-o", os.devnull])
        assert verify["code"] == 0, f"{size.label}: the valid run did not verify ({verify})"
        measured.append({"verify": verify, "scan": scan, "load_avg": os.getloadavg()[0]})
    row["rounds"] = measured
    verify, scan = measured[0]["verify"], measured[0]["scan"]
    row["verify_s"], row["verify_rss_mb"] = verify["seconds"], verify["rss_mb"]
    row["verify_cpu_s"] = verify["cpu_s"]
    last = measure(
        [
            str(BIN / "ft-verify"),
            str(run),
            "--since-step",
            str(size.steps - 1),
            "--format",
            "json",
            "-o",
            os.devnull,
        ]
    )
    assert last["code"] == 0, last
    row["incremental_s"], row["incremental_rss_mb"] = last["seconds"], last["rss_mb"]
    row["scan_s"], row["scan_rss_mb"] = scan["seconds"], scan["rss_mb"]
    row["scan_cpu_s"] = scan["cpu_s"]
    estimate = jsonl_bytes_estimate(run)
    row["jsonl_mb"] = estimate / 2**20
    row["baseline"] = None
    if estimate <= json_limit * 2**30:
        jsonl = root / "run.jsonl"
        row["jsonl_mb"] = write_jsonl(run, jsonl) / 2**20
        base = measure([sys.executable, str(HERE), "--baseline", str(jsonl)], BASELINE_TIMEOUT_S)
        row["baseline"] = base
        if not base["timed_out"]:
            result = json.loads(base["last_line"])
            assert result["violations"] == 0, f"baseline disagrees on a valid run: {result}"
        jsonl.unlink()
    return row


def _fmt_s(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _cpu(row: dict[str, Any]) -> str:
    """ft-verify's and the bare scan's CPU seconds and their ratio (blank in older rows)."""
    if "verify_cpu_s" not in row:
        return " |  | "
    verify, scan = row["verify_cpu_s"], row["scan_cpu_s"]
    return f"{_fmt_s(verify)} | {_fmt_s(scan)} | {verify / scan:.2f}x"


def _synth(row: dict[str, Any]) -> str:
    """Seconds (events/s) to write the run; blank for a run reused without that record."""
    if row["synth_s"] is None:
        return "(reused)"
    return f"{_fmt_s(row['synth_s'])} ({row['synth_eps']:,.0f})"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| steps | cells | B | samples/step | events | segments | Parquet MB | synth s "
        "(events/s) | ft-verify s | peak RSS MB | bare scan s | verify / scan | ft-verify CPU s "
        "| bare scan CPU s | verify / scan CPU | incremental (last step) s | JSONL MB | "
        "baseline s | baseline RSS MB | speedup |\n"
        "|" + "---:|" * 20 + "\n"
    )
    lines = []
    for r in rows:
        z, b = r["size"], r["baseline"]
        if b is None:
            base_s, base_rss, speed = f"not run (JSONL {r['jsonl_mb'] / 1024:.1f} GB)", "", ""
        elif b["timed_out"]:
            base_s, base_rss, speed = f"> {BASELINE_TIMEOUT_S} (timeout)", "", ""
        else:
            base_s = _fmt_s(b["seconds"])
            base_rss = f"{b['rss_mb']:.0f}"
            speed = f"{b['seconds'] / r['verify_s']:.1f}x"
        lines.append(
            f"| {z['steps']:,} | {z['cells']} | {z['B']:,} | {z['S']:,} | {r['events']:,} | "
            f"{r['segments']:,} | {r['disk_mb']:.1f} | {_synth(r)} | "
            f"{_fmt_s(r['verify_s'])} | {r['verify_rss_mb']:.0f} | "
            f"{_fmt_s(r['scan_s'])} | {r['verify_s'] / r['scan_s']:.1f}x | {_cpu(r)} | "
            f"{_fmt_s(r['incremental_s'])} | {r['jsonl_mb']:,.0f} | {base_s} | {base_rss} | "
            f"{speed} |"
        )
    return head + "\n".join(lines) + "\n"


def machine() -> str:
    import duckdb
    import pyarrow
    import pydantic

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, {platform.system()} "
        f"{platform.release()}; Python {platform.python_version()}, DuckDB {duckdb.__version__}, "
        f"pyarrow {pyarrow.__version__}, pydantic {pydantic.__version__}; load average at "
        f"start {os.getloadavg()[0]:.1f}"
    )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r["jsonl_mb"])
    ev = [r["jsonl_mb"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(ev, [r["verify_s"] for r in rows], "o-", label="ft-verify (full)")
    ax.plot(ev, [r["scan_s"] for r in rows], "s--", label="bare DuckDB scan of the segments")
    ax.plot(
        ev, [r["incremental_s"] for r in rows], "^-", label="ft-verify --since-step (last step)"
    )
    done = [r for r in rows if r["baseline"] and not r["baseline"]["timed_out"]]
    ax.plot(
        [r["jsonl_mb"] for r in done],
        [r["baseline"]["seconds"] for r in done],
        "x-",
        label="JSON lines + pydantic + Python sets",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("size of the run as JSON lines with plain id lists (MB): the ids it holds")
    ax.set_ylabel("seconds (wall, incl. process start)")
    ax.set_title("ftaudit verification time as the run grows")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two small sizes (a smoke run)")
    parser.add_argument("--plot", type=Path, help="write a PNG plot here (extra bench)")
    parser.add_argument("--json", type=Path, help="write the raw rows here")
    parser.add_argument("--json-limit-gb", type=float, default=1.0)
    parser.add_argument(
        "--rounds", type=int, default=1, help="measure ft-verify and the scan this many times"
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep each size's run here and reuse it when present (same seed, same events)",
    )
    parser.add_argument(
        "--size",
        action="append",
        metavar="STEPS,CELLS,B,S",
        help="benchmark only this size (repeatable), e.g. 1000,16,4096,512",
    )
    parser.add_argument(
        "--from-json",
        action="append",
        type=Path,
        metavar="FILE",
        help="print the table (and plot) of rows saved by --json instead of measuring",
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--scan", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        return _measure_child(args.measure)
    if args.scan:
        return _scan_child(args.scan)
    if args.baseline:
        return _baseline_child(args.baseline)
    if args.from_json:
        saved = [json.loads(f.read_text()) for f in args.from_json]
        rows = [r for doc in saved for r in doc["rows"]]
        print(f"Machine: {saved[0]['machine']}\n")
        print(table(rows))
        if args.plot:
            plot(rows, args.plot)
        return None
    about = machine()
    rows = []
    sizes = QUICK if args.quick else FULL
    if args.size:
        sizes = tuple(Size(*(int(x) for x in spec.split(","))) for spec in args.size)
    for size in sizes:
        if args.workdir:
            root = args.workdir / f"{size.steps}x{size.cells}xB{size.B}xS{size.S}"
            root.mkdir(parents=True, exist_ok=True)
        else:
            root = Path(tempfile.mkdtemp(prefix="ftaudit-bench-"))
        try:
            print(f"{size.label} ...", file=sys.stderr, flush=True)
            rows.append(bench_size(size, root, args.json_limit_gb, args.rounds))
        finally:
            if not args.workdir:
                shutil.rmtree(root, ignore_errors=True)
    print(f"Machine: {about}\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps({"machine": about, "rows": rows}, indent=1))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
