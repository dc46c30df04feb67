"""Start-up: ``ft-verify`` on a small run, median of 10, against ``python -c pass``.

A gate that runs ``ft-verify`` after every step pays its fixed cost each time: the
interpreter, the imports, listing the segments, loading them into DuckDB and the rules'
queries. This benchmark writes a small valid run with ``ftaudit synth`` (12 steps, one
restart, one retried step) and times, each in its own process, ``--repeat`` times:

- ``python -c pass`` (the interpreter alone);
- ``python -c "import pyarrow, pyarrow.parquet, pyarrow.compute, duckdb"`` (the floor of
  any verifier built on Arrow and DuckDB) and the same without ``pyarrow.compute`` (about
  30 ms of CPU, which ``ft-verify``'s plain path no longer imports: its floor);
- ``python -c "import ftaudit.verifier"`` (what ftaudit adds to that floor at import);
- ``ft-verify RUN_DIR`` (the real entry point) and ``ft-verify RUN_DIR --since-step 11``.

- ``ftaudit --help`` (the umbrella command must answer without loading the verifier);
- with ``--run RUN_DIR``, ``ft-verify RUN_DIR`` on that run too: the issue's figure is
  ``ft-verify`` on the demo's run (``ftaudit demo DIR`` writes one; a run whose verdict is
  a violation counts as well: exit 1 is a verdict, not a failure).

Each row gives the median wall time and the median CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)`` around the child): on a shared machine the wall
time follows the load, the CPU time much less. The children keep their bytecode in a
temporary ``PYTHONPYCACHEPREFIX`` (written by the untimed first run), as an installed
package has it: with ``PYTHONDONTWRITEBYTECODE`` set, every call would compile ftaudit's
modules from source again.

``--baseline SRC`` (the ``src`` folder of another ftaudit, e.g. ``git archive`` of an
older commit) times every command with that ftaudit too, alternating the two in each
round, so both see the same load: the table then gives both, and their CPU ratio. Run:
``.venv/bin/python benchmarks/startup_bench.py [--repeat 10] [--baseline SRC]
[--out benchmarks/results]``. ``startup_bench.md`` there gains this sitting's table as a
section before the earlier ones (``startup_bench.json`` holds this sitting's only).
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
    """Wall and CPU seconds of one child process (its output discarded); exit 1 is
    ``ft-verify``'s verdict on a run with violations, a result like 0."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(
    label: str, argv: list[str], repeat: int, envs: dict[str, dict[str, str]]
) -> dict[str, Timing]:
    """Median wall and CPU of ``argv`` under each of ``envs``, alternating them per round."""
    for env in envs.values():
        _timed(argv, env)  # warm the file cache and write the bytecode; not counted
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in envs}
    for _ in range(repeat):
        for name, env in envs.items():
            runs[name].append(_timed(argv, env))
    return {
        name: Timing(
            label, statistics.median(w for w, _ in got), statistics.median(c for _, c in got)
        )
        for name, got in runs.items()
    }


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


def _with_section(results: Path, section: str) -> str:
    """The results file with ``section`` (this sitting) before its earlier sittings: the
    file keeps the history that judges a change, so a run adds to it, never replaces it."""
    title = "# ft-verify start-up (median of 10)\n\n"
    old = results.read_text() if results.exists() else title
    at = old.find("\n## ")
    if at < 0:
        return f"{old.rstrip()}\n\n{section}"
    return f"{old[: at + 1]}{section}\n{old[at + 1 :]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    parser.add_argument("--baseline", type=Path, help="src folder of an ftaudit to compare")
    parser.add_argument(
        "--run", type=Path, help="a run to time ft-verify on as well (e.g. the demo's)"
    )
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
            "import pyarrow, pyarrow.parquet, duckdb": [
                py,
                "-c",
                "import pyarrow, pyarrow.parquet, duckdb",
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
        if args.run is not None:
            commands["ft-verify RUN (--run)"] = [str(BIN / "ft-verify"), str(args.run)]
        envs = {"current": env}
        if args.baseline is not None:
            path = [str(args.baseline.resolve()), *env.get("PYTHONPATH", "").split(os.pathsep)]
            envs["baseline"] = {**env, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
        timed = [measure(label, argv, args.repeat, envs) for label, argv in commands.items()]
    rows = [t["current"] for t in timed]
    baseline = [t["baseline"] for t in timed] if args.baseline is not None else []
    import duckdb
    import pyarrow
    import pydantic

    about = {
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
    if args.run is not None:
        about["--run"] = str(args.run)
    if args.baseline is not None:
        about["baseline"] = str(args.baseline)
    lines = [
        f"## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {about['commit']}",
        "",
        ", ".join(f"{k} {v}" for k, v in about.items()),
        "",
        *(_compared(rows, baseline) if baseline else _table(rows)),
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    results = args.out / "startup_bench.md"
    results.write_text(_with_section(results, text))
    payload = {
        "env": about,
        "rows": [asdict(r) for r in rows],
        "baseline_rows": [asdict(r) for r in baseline],
    }
    (args.out / "startup_bench.json").write_text(json.dumps(payload, indent=2) + "\n")


def _table(rows: list[Timing]) -> list[str]:
    base = rows[0]
    return [
        "| command | wall (s) | CPU (s) | wall / `python -c pass` |",
        "|---|---:|---:|---:|",
        *(
            f"| `{r.label}` | {r.wall_s:.3f} | {r.cpu_s:.3f} | {r.wall_s / base.wall_s:.1f}x |"
            for r in rows
        ),
    ]


def _compared(rows: list[Timing], baseline: list[Timing]) -> list[str]:
    lines = [
        "| command | CPU baseline (s) | CPU current (s) | current / baseline | "
        "wall baseline (s) | wall current (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for b, r in zip(baseline, rows, strict=True):
        lines.append(
            f"| `{r.label}` | {b.cpu_s:.3f} | {r.cpu_s:.3f} | {r.cpu_s / b.cpu_s:.2f} | "
            f"{b.wall_s:.3f} | {r.wall_s:.3f} |"
        )
    return lines


if __name__ == "__main__":
    main()
