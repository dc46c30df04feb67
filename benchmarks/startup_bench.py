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

- ``ftaudit --help`` (the umbrella command must answer without loading the verifier).

Each row gives the median wall time and the median CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)`` around the child): on a shared machine the wall
time follows the load, the CPU time much less. The children keep their bytecode in a
temporary ``PYTHONPYCACHEPREFIX`` (written by the untimed first run), as an installed
package has it: with ``PYTHONDONTWRITEBYTECODE`` set, every call would compile ftaudit's
modules from source again. Run:
``.venv/bin/python benchmarks/startup_bench.py [--repeat 10] [--out benchmarks/results]``.
"""

from __future__ import annotations

import argparse
import json
import os
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


def _timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process (its output discarded)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(label: str, argv: list[str], repeat: int, env: dict[str, str]) -> Timing:
    _timed(argv, env)  # warm the file cache and write the bytecode; not counted
    runs = [_timed(argv, env) for _ in range(repeat)]
    return Timing(
        label, statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs)
    )


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _commit() -> str:
    """The commit of the ftaudit the children import (``-dirty`` with local changes)."""
    import ftaudit

    src = Path(ftaudit.__file__).resolve().parent
    done = subprocess.run(
        ["git", "-C", str(src), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="ftaudit-startup-") as tmp:
        run = Path(tmp) / "run"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        subprocess.run([str(BIN / "ftaudit"), "synth", str(run), *SYNTH], check=True, env=env)
        load_before = _load()
        commands = {
            "python -c pass": [py, "-c", "pass"],
            "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb": [
                py,
                "-c",
                "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb",
            ],
            "import ftaudit.verifier": [py, "-c", "import ftaudit.verifier"],
            "ftaudit --help": [str(BIN / "ftaudit"), "--help"],
            "ft-verify RUN_DIR": [str(BIN / "ft-verify"), str(run)],
            "ft-verify RUN_DIR --format json": [str(BIN / "ft-verify"), str(run), "-f", "json"],
            "ft-verify RUN_DIR --since-step 11": [
                str(BIN / "ft-verify"),
                str(run),
                "--since-step",
                "11",
            ],
        }
        rows = [measure(label, argv, args.repeat, env) for label, argv in commands.items()]
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
        "commit": _commit(),
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
