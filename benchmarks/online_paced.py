"""Online verification paced to a share of one core, replayed on a simulated clock.

``online_replay.py`` polls every N steps. Here :class:`~ftaudit.verifier.pacing.CpuShare`
decides (``ft-verify --follow --cpu-share``): a poll that took ``c`` seconds of CPU makes
the next one wait until ``c / share`` seconds after it began. The run is written once,
with a hard-linked copy of its sealed files kept after every step from ``--attach`` on;
the copies are then replayed to a follower in a fresh process, one step every
``--step-s`` seconds of a simulated clock, and after each step the follower polls if its
pacer says the poll is due. Each poll's CPU is real (``process_time``); only the waiting
is simulated, so 240 steps of 1 second replay in the polls' own time.

The attach (the first poll, which loads the window from the log) is timed on its own and
the pacer starts after it: its cost is paid once, and at a 1% share it alone would put
the next poll minutes away. Printed per share: the polls, the steps judged, CPU per
judged step, the share of one core the polls took (over the replayed time, or through
the wait after the last poll where that ends later), and how many
steps each judged step waited after the step it was judged at (median and largest:
what the share costs in verdict latency).

Run: ``.venv/bin/python benchmarks/online_paced.py [--steps 450 --cells 16 --buffer-size
1048576 --samples-per-step 4096] [--attach 200 --polls 240] [--shares 0.01,0.02,0.05]
[--step-s 1] [--out DIR]``
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

HERE = Path(__file__).resolve().parent


def replay(root: Path, steps: list[int], since: int, share: float, step_s: float) -> dict:
    """One paced follower over the copies (run in a child process by :func:`main`)."""
    import time

    from ftaudit.verifier.online import OnlineVerifier
    from ftaudit.verifier.pacing import CpuShare
    from online_replay import publish

    live = root / "live"
    shutil.rmtree(live, ignore_errors=True)
    publish(root / f"at{steps[0]:08d}", live)
    follower = OnlineVerifier(live, since_step=since)
    began = time.process_time()
    follower.poll()  # attaching: the window loaded from the log
    attach_s = time.process_time() - began
    now = [0.0]
    pacer = CpuShare(share, clock=lambda: now[0])
    cpus: list[float] = []
    waited: list[int] = []
    for step in steps[1:]:
        now[0] = (step - steps[0]) * step_s
        publish(root / f"at{step:08d}", live)
        if pacer.wait() > 0.0:
            continue
        poll = pacer.run(follower.poll)
        cpus.append(pacer.last_cpu)
        if poll.judged is not None:
            first, last = poll.judged
            waited += [step - s for s in range(first, last + 1)]
    follower.close()
    return {
        "attach_s": attach_s,
        "cpu_s": cpus,
        "judged_steps": len(waited),
        "waited_steps": waited,
        # through the wait the last poll set: each poll is paid for by the wait after it
        "replayed_s": max(now[0], now[0] + pacer.wait()),
    }


def _child(root: Path, steps: list[int], since: int, share: float, step_s: float) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from online_paced import replay; "
        "from pathlib import Path; print(json.dumps(replay(Path(sys.argv[2]), "
        "json.loads(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))))"
    )
    args = [sys.executable, "-c", code, str(HERE), str(root), json.dumps(steps)]
    args += [str(since), str(share), str(step_s)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    sys.path.insert(0, str(HERE))
    from online_bench import add_shape_arguments
    from online_replay import write

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser, 450, 16, 1_048_576, 4096)
    parser.add_argument("--attach", type=int, default=200, help="the first copy's step")
    parser.add_argument("--polls", type=int, default=240, help="steps replayed after attaching")
    parser.add_argument("--shares", default="0.01,0.02,0.05", help="comma-separated fractions")
    parser.add_argument("--step-s", type=float, default=1.0, help="a training step's duration")
    parser.add_argument("--out", type=Path, help="write online_paced.json here")
    args = parser.parse_args()
    if args.attach + args.polls >= args.steps:
        parser.error("--steps must leave --polls steps after --attach")
    shares = [float(s) for s in args.shares.split(",")]
    args.every = 1  # a copy after every step: the pacer picks which steps a poll comes at
    with tempfile.TemporaryDirectory(prefix="online-paced-") as tmp:
        root = Path(tmp)
        steps = write(args, root, [args.attach])[args.attach]
        since = max(0, args.attach - 10)
        found = {share: _child(root, steps, since, share, args.step_s) for share in shares}
    print(
        f"# online_paced: {args.steps} steps x {args.cells} cells, B={args.buffer_size:,}, "
        f"{args.samples_per_step:,} samples/step, {args.polls} steps of {args.step_s:g} s "
        f"replayed from step {args.attach:,}; python {platform.python_version()}, "
        f"{os.cpu_count()} cpus"
    )
    print(
        "| share | attach s | polls | steps judged | CPU per judged step | share taken "
        "| steps waited, median / max |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for share, r in found.items():
        cpu = sum(r["cpu_s"])
        per_step = cpu / r["judged_steps"] * 1000 if r["judged_steps"] else float("nan")
        waited = r["waited_steps"] or [0]
        print(
            f"| {share:.1%} | {r['attach_s']:.2f} | {len(r['cpu_s'])} | {r['judged_steps']} "
            f"| {per_step:.1f} ms | {cpu / r['replayed_s']:.2%} "
            f"| {statistics.median(waited):g} / {max(waited)} |"
        )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        about = {k: str(v) for k, v in vars(args).items()}
        (args.out / "online_paced.json").write_text(
            json.dumps({"args": about, "shares": {str(k): v for k, v in found.items()}}, indent=1)
        )


if __name__ == "__main__":
    main()
