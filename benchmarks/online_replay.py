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
archive``) each round runs both versions side by side, in lockstep: a follower process
each, one poll of each in turn at every copy (the first to poll alternating). On this
shared machine only such pairs judge a change: whole replays one after the other moved
10% apart from one minute to the next, so the report gives the median of the paired
polls' ratios too. Every version judges the same steps (a poll that judged nothing fails
the run).

``--attach`` takes several steps (``200,9800``): a follower attaches at each, on copies
of the same run, and polls ``--polls`` times; the late point's cost per poll over the
early one's says whether a poll's cost stays flat as the run grows.

Flatness needs whole roll periods: a writer rolls every 1,280 steps at this shape, and
for about 180 steps after a roll a poll's window begins inside the merged segment. Eight
polls at step 99,000, five of them after a roll, once read 2.18x step 1,000's; 130 polls
at each point, 1.04-1.10x for the same code. Writing 100,000 steps takes 20-25 minutes:
``--copies DIR`` keeps the copies, and a later call with the same run options replays them.

Run: ``.venv/bin/python benchmarks/online_replay.py [--steps 330 --cells 16 --buffer-size
1048576 --samples-per-step 4096] [--attach 200 --polls 12] [--rounds 3] [--baseline SRC]
[--out DIR] [--copies DIR]``; to step 100,000: ``--steps 100400 --attach 1000,99000
--polls 130``.
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


def write(args: argparse.Namespace, root: Path, points: list[int]) -> dict[int, list[int]]:
    """Write the run, keeping a copy at each poll step; the steps copied, by attach point."""
    from ftaudit.synth import synthesize
    from online_bench import live_run

    config = live_run(args)
    wanted = {p + i * args.every: p for p in points for i in range(args.polls + 1)}
    steps: dict[int, list[int]] = {p: [] for p in points}

    def after_step(step: int) -> None:
        if step in wanted:
            snapshot(root / "run", root / f"at{step:08d}")
            steps[wanted[step]].append(step)

    synthesize(root / "run", config, after_step=after_step)
    return steps


_RUN_OPTIONS = ("steps", "cells", "buffer_size", "samples_per_step", "flush_every", "every")


def kept_copies(args: argparse.Namespace, root: Path, points: list[int]) -> dict[int, list[int]]:
    """The copies :func:`write` makes, read back from ``root`` where an earlier call with
    the same run options kept them there (``copies.json``), else written there."""
    record = root / "copies.json"
    options = {name: getattr(args, name) for name in _RUN_OPTIONS}
    if record.exists():
        kept = json.loads(record.read_text())
        steps = {int(p): s for p, s in kept["steps"].items()}
        if kept["options"] != options:
            raise SystemExit(f"{record}: copies of another run ({kept['options']})")
        wanted = {p: [p + i * args.every for i in range(args.polls + 1)] for p in points}
        if any(not set(w) <= set(steps.get(p, ())) for p, w in wanted.items()):
            raise SystemExit(f"{record}: holds copies at attach points {sorted(steps)} only")
        return wanted
    root.mkdir(parents=True, exist_ok=True)
    steps = write(args, root, points)
    record.write_text(json.dumps({"options": options, "steps": steps}))
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


def serve(root: Path, live: Path, since: int) -> None:
    """One follower over the copies, in a child process (:class:`_Follower`): each line
    on stdin names a copy's step; the first attaches, each later one is published to
    ``live`` and polled, its CPU written back as a line of JSON."""
    import time

    from ftaudit.verifier.online import OnlineVerifier

    shutil.rmtree(live, ignore_errors=True)
    follower = None
    for line in sys.stdin:
        publish(root / f"at{int(line):08d}", live)
        if follower is None:
            follower = OnlineVerifier(live, since_step=since)
            follower.poll()  # attaching: the window loaded from the log
            print(json.dumps({}), flush=True)
            continue
        started = time.process_time()
        poll = follower.poll()
        cpu = time.process_time() - started
        if poll.judged is None:
            raise SystemExit(f"the poll at step {int(line)} judged nothing")
        print(json.dumps({"cpu_s": cpu, "judged": poll.judged}), flush=True)
    if follower is not None:
        follower.close()
    shutil.rmtree(live, ignore_errors=True)


class _Follower:
    """A child process following copies with one version of ftaudit (:func:`serve`)."""

    def __init__(self, src: Path | None, root: Path, name: str, since: int) -> None:
        env = dict(os.environ)
        if src is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(src.resolve()), env.get("PYTHONPATH", "")) if p
            )
        code = (
            "import sys; sys.path.insert(0, sys.argv[1]); from online_replay import serve; "
            "from pathlib import Path; "
            "serve(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))"
        )
        here = str(Path(__file__).parent)
        live = root / f"live-{name}"
        args = [sys.executable, "-c", code, here, str(root), str(live), str(since)]
        self.process = subprocess.Popen(
            args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.cpus: list[float] = []
        self.judged = 0

    def step(self, step: int) -> None:
        """Publish the copy at ``step`` and poll (the first: attach); wait for it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{step}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the follower stopped at step {step} (rc {self.process.wait()})")
        done = json.loads(line)
        if "cpu_s" in done:
            self.cpus.append(done["cpu_s"])
            self.judged += done["judged"][1] - done["judged"][0] + 1

    def close(self) -> dict[str, object]:
        assert self.process.stdin is not None
        self.process.stdin.close()
        if self.process.wait() != 0:
            raise SystemExit(f"a follower failed (rc {self.process.returncode})")
        return {"cpu_s": self.cpus, "judged_steps": self.judged}


def lockstep(
    versions: dict[str, Path | None], root: Path, steps: list[int], since: int
) -> dict[str, dict[str, object]]:
    """Every version follows the same copies at once, one poll each in turn (the first
    to poll alternating): a slow minute of the machine slows both alike, where whole
    replays one after the other moved 10% apart from one to the next."""
    followers = {name: _Follower(src, root, name, since) for name, src in versions.items()}
    order = list(followers.values())
    for i, step in enumerate(steps):
        for follower in order if i % 2 == 0 else order[::-1]:
            follower.step(step)
    return {name: f.close() for name, f in followers.items()}


def main() -> None:
    from online_bench import add_shape_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser, 330, 16, 1_048_576, 4096)
    parser.add_argument(
        "--attach", default="200", help="the first copy's step; several: comma-separated"
    )
    parser.add_argument("--every", type=int, default=10, help="a copy (a poll) every N steps")
    parser.add_argument("--polls", type=int, default=12, help="polls after attaching")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="src folder of an ftaudit to compare")
    parser.add_argument("--out", type=Path, help="write online_replay.json here")
    parser.add_argument(
        "--copies",
        type=Path,
        help="keep the run's copies here, or replay those kept by an earlier call with the "
        "same run options (writing 100,000 steps takes 20-25 minutes)",
    )
    args = parser.parse_args()
    points = [int(a) for a in args.attach.split(",")]
    if max(points) + args.polls * args.every >= args.steps:
        parser.error("--steps must leave --polls polls after each --attach")
    with tempfile.TemporaryDirectory(prefix="online-replay-") as tmp:
        root = args.copies if args.copies is not None else Path(tmp)
        steps = kept_copies(args, root, points)
        versions: dict[str, Path | None] = {"current": None}
        if args.baseline is not None:
            versions = {"baseline": args.baseline, **versions}
        # rounds[i][point][version]: each round replays every point with every version
        rounds: list[dict[int, dict[str, dict[str, object]]]] = []
        for _ in range(args.rounds):
            rounds.append(
                {p: lockstep(versions, root, steps[p], max(0, p - args.every)) for p in points}
            )
    print(
        f"# online_replay: {args.steps} steps x {args.cells} cells, B={args.buffer_size:,}, "
        f"{args.samples_per_step:,} samples/step, {args.polls} polls every {args.every} "
        f"steps from each of steps {args.attach}; python {platform.python_version()}, "
        f"{os.cpu_count()} cpus"
    )
    columns = [(p, n) for p in points for n in versions]
    print("| round | " + " | ".join(f"step {p:,}, {n}" for p, n in columns) + " |")
    print("|---|" + "---:|" * len(columns))
    for i, r in enumerate(rounds, 1):
        cells = [f"{statistics.median(r[p][n]['cpu_s']) * 1000:.1f} ms" for p, n in columns]
        print(f"| {i} | " + " | ".join(cells) + " |")
    medians = {
        (p, n): statistics.median(statistics.median(r[p][n]["cpu_s"]) for r in rounds)
        for p, n in columns
    }
    per_step = {f"{p}/{n}": m / args.every * 1000 for (p, n), m in medians.items()}
    print(
        "median of rounds, per judged step: "
        + ", ".join(f"step {k}: {v:.1f} ms" for k, v in per_step.items())
    )
    # the mean counts the polls at a writer's roll (0.4-0.6 s each since day 31, every 1,280 steps
    # at this shape): what a follower costs over a long stretch, where the median does not
    means = {
        (p, n): statistics.median(statistics.mean(r[p][n]["cpu_s"]) for r in rounds)
        for p, n in columns
    }
    print(
        "mean poll (rolls included), median of rounds, per judged step: "
        + ", ".join(f"step {p}/{n}: {m / args.every * 1000:.1f} ms" for (p, n), m in means.items())
    )
    for p in points:
        if args.baseline is not None:
            ratio = medians[(p, "current")] / medians[(p, "baseline")]
            # the polls side by side: each of the current version's over the baseline's
            # at the same copy, in the same minute
            paired = statistics.median(
                c / b
                for r in rounds
                for c, b in zip(r[p]["current"]["cpu_s"], r[p]["baseline"]["cpu_s"], strict=True)
            )
            print(
                f"step {p:,}: current / baseline {ratio:.2f}x "
                f"(median of the paired polls' ratios: {paired:.3f}x)"
            )
    if len(points) > 1:
        for n in versions:
            late = medians[(points[-1], n)] / medians[(points[0], n)]
            print(f"{n}: step {points[-1]:,} / step {points[0]:,} {late:.2f}x")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        about = {k: str(v) for k, v in vars(args).items()}
        keyed = [{str(p): v for p, v in r.items()} for r in rounds]
        (args.out / "online_replay.json").write_text(
            json.dumps({"args": about, "rounds": keyed, "per_step_ms": per_step}, indent=1)
        )


if __name__ == "__main__":
    main()
