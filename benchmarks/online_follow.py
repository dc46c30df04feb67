"""Online verification, one follower for the whole run: does its cost per step grow?

``online_bench.py`` and ``online_replay.py`` attach a fresh follower at each sample point;
a driver keeps one for the whole run, with everything it kept since the first poll (its
footers, rule states, a DuckDB table that only appends and deletes). This script writes a
valid synth run (``online_bench.live_run``'s shape) with one follower polling every
``--every`` steps from ``--start`` on, in the writing process, and reports per stretch of
``--stretch`` steps the median CPU per judged step of a poll: the whole process's
(``process_time``: DuckDB's and the writer's threads included) and the main thread's
alone (``thread_time``), and the writer's CPU per step between two polls.

The stretches of one run share this machine's drift (30-40% over minutes on the shared
cores): read a rise against a repeat of the run.

Run: ``.venv/bin/python benchmarks/online_follow.py [--steps 3000 --cells 16 --buffer-size
1048576 --samples-per-step 4096] [--every 10 --start 100 --stretch 500] [--out DIR]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass(frozen=True)
class Poll:
    step: int
    judged_steps: int
    process_s: float
    """The poll's CPU, every thread of the process."""
    thread_s: float
    """The poll's CPU on the calling thread alone."""
    writer_s: float
    """The process's CPU since the last poll: the writer's steps."""


def follow(args: argparse.Namespace, root: Path) -> list[Poll]:
    """Write the run with one follower polling it; each poll that judged steps."""
    from ftaudit.synth import synthesize
    from ftaudit.verifier.online import OnlineVerifier
    from online_bench import live_run

    online = OnlineVerifier(root / "run")
    polls: list[Poll] = []
    since_last = [time.process_time()]

    def after_step(step: int) -> None:
        if step < args.start or step % args.every:
            return
        writer = time.process_time() - since_last[0]
        process, thread = time.process_time(), time.thread_time()
        poll = online.poll()
        process, thread = time.process_time() - process, time.thread_time() - thread
        since_last[0] = time.process_time()
        if poll.judged is not None:
            first, last = poll.judged
            polls.append(Poll(step, last - first + 1, process, thread, writer))

    synthesize(root / "run", live_run(args), after_step=after_step)
    online.close()
    return polls


def stretches(polls: list[Poll], size: int, every: int) -> list[dict[str, float]]:
    """Per stretch of ``size`` steps: median CPU per judged step (ms) and per writer step."""
    out = []
    for lo in range(0, max(p.step for p in polls) + 1, size):
        mine = [p for p in polls if lo <= p.step < lo + size]
        if mine:
            out.append(
                {
                    "from": lo,
                    "to": lo + size,
                    "polls": len(mine),
                    "process_ms": statistics.median(p.process_s / p.judged_steps for p in mine)
                    * 1000,
                    "thread_ms": statistics.median(p.thread_s / p.judged_steps for p in mine)
                    * 1000,
                    "writer_ms": statistics.median(p.writer_s / every for p in mine) * 1000,
                }
            )
    return out


def main() -> None:
    from online_bench import add_shape_arguments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser, 3000, 16, 1_048_576, 4096)
    parser.add_argument("--every", type=int, default=10, help="poll every N steps")
    parser.add_argument("--start", type=int, default=100, help="the first poll's step")
    parser.add_argument("--stretch", type=int, default=500, help="steps a row summarizes")
    parser.add_argument("--out", type=Path, help="write online_follow.json here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="online-follow-") as tmp:
        polls = follow(args, Path(tmp))
    if not polls:
        raise SystemExit("no poll judged a step: --steps too short for --start and --every")
    rows = stretches(polls, args.stretch, args.every)
    print(
        f"# online_follow: {args.steps:,} steps x {args.cells} cells, B={args.buffer_size:,}, "
        f"{args.samples_per_step:,} samples/step, one follower polling every {args.every} "
        f"steps from {args.start}"
    )
    print("| steps | polls | poll, process | poll, main thread | writer, per step |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['from']:,}-{r['to']:,} | {r['polls']} | {r['process_ms']:.1f} ms | "
            f"{r['thread_ms']:.1f} ms | {r['writer_ms']:.1f} ms |"
        )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        about = {k: str(v) for k, v in vars(args).items()}
        out = {"args": about, "stretches": rows, "polls": [asdict(p) for p in polls]}
        (args.out / "online_follow.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
