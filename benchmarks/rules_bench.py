"""The rules' CPU after a run is opened, against another ftaudit, alternating.

On a shared machine the whole ``ft-verify``'s CPU moves a second or more from one run to
the next (on day nineteen the bare scan of the largest benchmark run took 6.6 to 9.2 s
of CPU in consecutive rounds), more than a change to one rule saves. This benchmark
times what such a change changes. Each round runs, in a fresh process per version:
``Session.open`` of ``RUN_DIR`` (timed on its own), then every rule's check in the
order ``ft-verify`` runs them (process CPU, DuckDB's threads included). Each version
starts as its own ``ft-verify`` does (numpy on small pages; the collector's start-up
threshold until the imports are made, then whatever that version's
``cli.startup.imports_made`` sets).

With ``--baseline SRC`` (the ``src`` folder of another ftaudit, e.g. ``git archive`` of
an older commit) that version runs too, first in each round, so both see the same
load. Printed: a row per round and version (opening, all rules, each rule of 0.05 s or
more), then each rule's median per version and their ratio. ``--json FILE`` keeps the
rounds.

Run: ``.venv/bin/python benchmarks/rules_bench.py RUN_DIR [--rounds 4] [--baseline SRC]
[--json FILE]`` (e.g. on ``verify_bench.py``'s largest run: ``--workdir DIR`` keeps it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve()
SHOWN_S = 0.05
"""A rule is shown per round from this much CPU in some round (all are in the JSON)."""


@dataclass(frozen=True)
class Round:
    round: int
    version: str
    open_s: float
    rules: dict[str, float]
    """Each rule's CPU seconds, by code, in the order run."""

    @property
    def rules_s(self) -> float:
        return sum(self.rules.values())


def _child(run_dir: str) -> None:
    """One version's timings of ``run_dir``, as one JSON line on stdout."""
    import time

    from ftaudit.cli.startup import collecting_late, imports_made, small_pages_for_numpy

    small_pages_for_numpy()
    with collecting_late():
        from ftaudit.verifier.context import RunContext
        from ftaudit.verifier.rules import RULES
        from ftaudit.verifier.session import Session

        imports_made()
        started = time.process_time()
        session = Session.open(run_dir)
        opened = time.process_time()
        ctx = RunContext(session)
        rules = {}
        for rule in RULES:
            before = time.process_time()
            rule.check(ctx)
            rules[rule.code] = time.process_time() - before
    print(json.dumps({"open_s": opened - started, "rules": rules}))


def measure(run_dir: Path, src: Path | None) -> tuple[float, dict[str, float]]:
    """Open ``run_dir`` and run every rule in a child, with the ftaudit of ``src`` (None:
    this checkout's)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    command = [sys.executable, str(HERE), "--child", str(run_dir)]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"rules_bench: the {src or 'current'} child failed:\n{done.stderr}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return found["open_s"], found["rules"]


def table(rounds: list[Round]) -> str:
    """A row per round and version, then each rule's median per version."""
    shown = [c for c in rounds[0].rules if any(r.rules.get(c, 0.0) >= SHOWN_S for r in rounds)]
    lines = [
        "| round | version | open s | all rules s | " + " | ".join(shown) + " |",
        "|---|---|---:|---:|" + "---:|" * len(shown),
    ]
    for r in rounds:
        cells = " | ".join(f"{r.rules.get(c, 0.0):.2f}" for c in shown)
        lines.append(f"| {r.round} | {r.version} | {r.open_s:.2f} | {r.rules_s:.2f} | {cells} |")
    versions = list(dict.fromkeys(r.version for r in rounds))
    lines += ["", "| rule | " + " | ".join(f"{v}, median s" for v in versions) + " |"]
    lines.append("|---|" + "---:|" * len(versions))
    for code in [*rounds[0].rules, "all rules"]:
        medians = [
            statistics.median(
                r.rules_s if code == "all rules" else r.rules.get(code, 0.0)
                for r in rounds
                if r.version == v
            )
            for v in versions
        ]
        lines.append(f"| {code} | " + " | ".join(f"{m:.3f}" for m in medians) + " |")
    if len(versions) == 2:
        base, current = (
            statistics.median(r.rules_s for r in rounds if r.version == v) for v in versions
        )
        lines += ["", f"all rules, current / baseline (medians): {current / base:.2f}x"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", type=Path, help="the src folder of another ftaudit")
    parser.add_argument("--json", type=Path, help="write the rounds here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(str(args.run_dir))
    versions: list[tuple[str, Path | None]] = [("current", None)]
    if args.baseline is not None:
        versions.insert(0, ("baseline", args.baseline.resolve()))
    rounds = []
    for n in range(1, args.rounds + 1):
        for name, src in versions:
            open_s, rules = measure(args.run_dir, src)
            rounds.append(Round(n, name, open_s, rules))
            print(f"round {n}, {name}: open {open_s:.2f} s, rules {rounds[-1].rules_s:.2f} s")
    print()
    print(table(rounds))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rounds], indent=1) + "\n")
    return None


if __name__ == "__main__":
    main()
