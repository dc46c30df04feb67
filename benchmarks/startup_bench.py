"""Start-up: ``ft-verify`` on a small run, median of 10, against ``python -c pass``.

A gate that runs ``ft-verify`` after every step pays its fixed cost each time: the
interpreter, the imports, listing the segments, loading them into DuckDB and the rules'
queries. This benchmark writes a small valid run with ``ftaudit synth`` (12 steps, one
restart, one retried step) and times, each in its own process, ``--repeat`` times:

- ``python -c pass`` (the interpreter alone);
- ``python -c "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb"`` (the floor of
  any verifier built on Arrow and DuckDB);
- ``python -c "import ftaudit.verifier"`` (what ftaudit adds to that floor at import);
- ``ft-verify RUN_DIR`` (the real entry point) and ``ft-verify RUN_DIR --since-step 11``.

Each row gives the median wall time and the median CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)`` around the child): on a shared machine the wall
time follows the load, the CPU time much less. Run:
``.venv/bin/python benchmarks/startup_bench.py [--repeat 10] [--out benchmarks/results]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
SYNTH = ("--steps", "12", "--restarts", "1", "--retries", "1")


@dataclass(frozen=True)
class Timing:
    label: str
    wall_s: float
    cpu_s: float


def _timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(label: str, argv: list[str], repeat: int) -> Timing:
    _timed(argv)  # warm the file cache; not counted
    runs = [_timed(argv) for _ in range(repeat)]
    return Timing(
        label, statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
    )


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ftaudit-startup-") as tmp:
        run = Path(tmp) / "run"
        subprocess.run([str(BIN / "ftaudit"), "synth", str(run), *SYNTH], check=True)
        load_before = _load()
        rows = [
            measure("python -c pass", [py, "-c", "pass"], args.repeat),
            measure(
                "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb",
                [py, "-c", "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb"],
                args.repeat,
            ),
            measure("import ftaudit.verifier", [py, "-c", "import ftaudit.verifier"], args.repeat),
            measure("ft-verify RUN_DIR", [str(BIN / "ft-verify"), str(run)], args.repeat),
            measure(
                "ft-verify RUN_DIR --since-step 11",
                [str(BIN / "ft-verify"), str(run), "--since-step", "11"],
                args.repeat,
            ),
        ]
    import duckdb
    import pyarrow
    import pydantic

    env = {
        "python": platform.python_version(),
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb.__version__,
        "pydantic": pydantic.__version__,
        "machine": f"{platform.machine()}, {platform.system()}",
        "load_average": f"{load_before} before, {_load()} after",
        "repeat": args.repeat,
        "run": "ftaudit synth " + " ".join(SYNTH),
    }
    base = rows[0]
    lines = [
        f"# ft-verify start-up (median of {args.repeat})",
        "",
        ", ".join(f"{k} {v}" for k, v in env.items()),
        "",
        "| command | wall (s) | CPU (s) | wall / `python -c pass` |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| `{r.label}` | {r.wall_s:.3f} | {r.cpu_s:.3f} | {r.wall_s / base.wall_s:.1f}x |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "startup_bench.md").write_text(text)
    payload = {"env": env, "rows": [asdict(r) for r in rows]}
    (args.out / "startup_bench.json").write_text(json.dumps(payload, indent=2) + "\n")


if __name__ == "__main__":
    main()
