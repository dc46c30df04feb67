"""Online verification, replayed: a follower's CPU per poll with no writer beside it.

``online_bench.py`` follows a run while it is written, in the writing process: a poll's
CPU there includes the writer threads' work during the poll, and its medians of a few
polls move 30% from one process to the next. This script separates the two. It writes
a valid synth run once and, every ``--every`` steps from ``--attach``, keeps a hard-linked
copy of what the run directory held then (sealed segments only: a flush renames a
finished file, so a link is the file as it stays). Then it replays those copies to a
follower, one after another, in a fresh directory (links made and removed as the run
gained segments and a roll removed some), and times each poll's CPU (``process_time``:
the follower's threads, DuckDB's included; nothing else runs in the process).

With ``--baseline SRC`` (the ``src`` folder of another ftaudit, e.g. from ``git
archive``) each round replays the same copies once with each version, alternating: on
this shared machine only such pairs judge a change. Every version judges the same steps
(a poll that judged nothing fails the run).

Run: ``.venv/bin/python benchmarks/online_replay.py [--steps 330 --cells 16 --buffer-size
1048576 --samples-per-step 4096] [--rounds 3] [--baseline SRC] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def snapshot(run: Path, into: Path) -> None:
    """Hard links of every sealed file ``run`` holds now (temp files of flushes left out)."""
    for folder, _, files in os.walk(run):
        rel = Path(folder).relative_to(run)
        (into / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.startswith("."):
                continue
            try:
                os.link(Path(folder) / name, into / rel / name)
            except FileNotFoundError:  # a roll removed it since the walk listed it
                pass


def write(args: argparse.Namespace, root: Path) -> list[int]:
    """Write the run, keeping a copy at each poll step; the steps copied."""
    from ftaudit.synth import synthesize
    from online_bench import live_run

    config = live_run(args)
    steps: list[int] = []

    def after_step(step: int) -> None:
        if step >= args.attach and (step - args.attach) % args.every == 0:
            snapshot(root / "run", root / f"at{step:08d}")
            steps.append(step)

    synthesize(root / "run", config, after_step=after_step)
    return steps


def publish(copy: Path, live: Path) -> None:
    """Make ``live`` hold exactly the files of ``copy`` (links; the others removed)."""
    want = set()
    for folder, _, files in os.walk(copy):
        rel = Path(folder).relative_to(copy)
        (live / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            want.add(rel / name)
            if not (live / rel / name).exists():
                os.link(Path(folder) / name, live / rel / name)
    for folder, _, files in os.walk(live):
        rel = Path(folder).relative_to(live)
        for name in files:
            if rel / name not in want:
                os.unlink(live / rel / name)


def replay(root: Path, steps: list[int], since: int) -> dict[str, object]:
    """One follower over the copies (run in a child process by :func:`main`)."""
    import time

    import ftaudit
    from ftaudit.verifier.online import OnlineVerifier

    live = root / "live"
    shutil.rmtree(live, ignore_errors=True)
    publish(root / f"at{steps[0]:08d}", live)
    follower = OnlineVerifier(live, since_step=since)
    follower.poll()  # attaching: the window loaded from the log
    cpus, judged = [], 0
    for step in steps[1:]:
        publish(root / f"at{step:08d}", live)
        started = time.process_time()
        poll = follower.poll()
        cpus.append(time.process_time() - started)
        if poll.judged is None:
            raise SystemExit(f"the poll at step {step} judged nothing")
        judged += poll.judged[1] - poll.judged[0] + 1
    follower.close()
    return {"ftaudit": ftaudit.__file__, "cpu_s": cpus, "judged_steps": judged}


def _child(src: Path | None, root: Path, steps: list[int], since: int) -> dict[str, object]:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(src.resolve()), env.get("PYTHONPATH", "")) if p
        )
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from online_replay import replay; "
        "from pathlib import Path; "
        "print(json.dumps(replay(Path(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4]))))"
    )
    here = str(Path(__file__).parent)
    args = [sys.executable, "-c", code, here, str(root), json.dumps(steps), str(since)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=330)
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--buffer-size", type=int, default=1_048_576)
    parser.add_argument("--samples-per-step", type=int, default=4096)
    parser.add_argument("--flush-every", type=int, default=5)
    parser.add_argument("--attach", type=int, default=200, help="the first copy's step")
    parser.add_argument("--every", type=int, default=10, help="a copy (a poll) every N steps")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="src folder of an ftaudit to compare")
    parser.add_argument("--out", type=Path, help="write online_replay.json here")
    args = parser.parse_args()
    if args.attach + 2 * args.every >= args.steps:
        parser.error("--steps must leave two polls after --attach")
    with tempfile.TemporaryDirectory(prefix="online-replay-") as tmp:
        root = Path(tmp)
        steps = write(args, root)
        since = max(0, args.attach - args.every)
        versions: dict[str, Path | None] = {"current": None}
        if args.baseline is not None:
            versions = {"baseline": args.baseline, **versions}
        rounds: list[dict[str, dict[str, object]]] = []
        for _ in range(args.rounds):
            rounds.append({name: _child(src, root, steps, since) for name, src in versions.items()})
    print(
        f"# online_replay: {args.steps} steps x {args.cells} cells, B={args.buffer_size:,}, "
        f"{args.samples_per_step:,} samples/step, a poll every {args.every} steps from "
        f"{args.attach}; python {platform.python_version()}, {os.cpu_count()} cpus"
    )
    print("| round | " + " | ".join(f"{n}: median CPU per poll" for n in versions) + " |")
    print("|---|" + "---:|" * len(versions))
    for i, r in enumerate(rounds, 1):
        cells = [f"{statistics.median(r[n]['cpu_s']) * 1000:.1f} ms" for n in versions]
        print(f"| {i} | " + " | ".join(cells) + " |")
    medians = {
        n: statistics.median(statistics.median(r[n]["cpu_s"]) for r in rounds) for n in versions
    }
    per_step = {n: medians[n] / args.every * 1000 for n in versions}
    print(
        "median of rounds, per judged step: "
        + ", ".join(f"{n} {per_step[n]:.1f} ms" for n in versions)
    )
    if args.baseline is not None:
        print(f"current / baseline: {medians['current'] / medians['baseline']:.2f}x")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        about = {k: str(v) for k, v in vars(args).items()}
        (args.out / "online_replay.json").write_text(
            json.dumps({"args": about, "rounds": rounds, "per_step_ms": per_step}, indent=1)
        )


if __name__ == "__main__":
    main()
