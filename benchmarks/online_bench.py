"""Online verification: what judging a live run's steps costs, early and late in the run.

Writes a valid synth run and, at sample points along it (``--at``), attaches an
:class:`~ftaudit.verifier.online.OnlineVerifier` in the writing process (``since_step``:
a follower that joins the run there), then polls it every ``--every`` steps, ``--polls``
times (the driver's usage: a poll as steps commit). The first poll after attaching loads
the window from the log (as after a resume) and is reported apart; the following polls
move the window along. Each poll's CPU time (``time.process_time``: this process,
DuckDB's threads included), the steps it judged and the segments it read are recorded.

The result is a ratio, not a wall time: the median cost per judged step at the last
sample point against the first (flat: about 1x), and the per-step CPU against the step
duration a job would have (``--step-s``, 1 s by default). Sampling, not judging every
step, keeps a 100,000-step shape to the cost of writing the run.

Run: ``.venv/bin/python benchmarks/online_bench.py [--steps 10000 --at 100,1000,10000]
[--out benchmarks/results] [--work DIR | --keep DIR]``; ``--plot-only`` redraws the PNG
from the JSON (needs matplotlib: the ``bench`` extra). ``--keep`` leaves the run on disk,
to profile a poll early and late on the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ftaudit.synth import SynthConfig

# ftaudit, DuckDB and pyarrow are imported where used: --plot-only runs with matplotlib alone


@dataclass(frozen=True)
class PollCost:
    point: int
    """The sample point (the step the follower attached at)."""
    step: int
    """The step the writer had logged when the poll ran."""
    attach: bool
    """The first poll after attaching: the window loaded from the log."""
    judged_steps: int
    segments_read: int
    segments_total: int
    cpu_s: float


def run(
    config: SynthConfig, at: list[int], every: int, polls: int, root: Path
) -> tuple[list[PollCost], float]:
    """Write the run, following it around each sample point; (polls, writer CPU s)."""
    from ftaudit.synth import synthesize
    from ftaudit.verifier.online import OnlineVerifier

    out: list[PollCost] = []
    follower: list[tuple[int, OnlineVerifier, int]] = []  # (point, verifier, polls left)

    def after_step(step: int) -> None:
        if step in at:
            follower.append((step, OnlineVerifier(root / "run", since_step=step - every), polls))
        if not follower or step % every:
            return
        point, online, left = follower[0]
        started = time.process_time()
        poll = online.poll()
        cpu = time.process_time() - started
        if poll.judged is not None:
            first, last = poll.judged
            attach = left == polls
            out.append(
                PollCost(
                    point,
                    step,
                    attach,
                    last - first + 1,
                    poll.segments_read,
                    online.segments_seen,
                    cpu,
                )
            )
            assert not online.violations, online.violations[:3]
            left -= 1
        if left <= 0:
            online.close()
            follower.pop(0)
        else:
            follower[0] = (point, online, left)

    started = time.process_time()
    synthesize(root / "run", config, after_step=after_step)
    writing = time.process_time() - started - sum(p.cpu_s for p in out)
    return out, writing


def _per_step(polls: list[PollCost]) -> float:
    return statistics.median(p.cpu_s / p.judged_steps for p in polls)


def summarize(polls: list[PollCost], step_s: float) -> list[dict]:
    points = []
    for point in sorted({p.point for p in polls}):
        mine = [p for p in polls if p.point == point]
        moved = [p for p in mine if not p.attach]
        attach = [p for p in mine if p.attach]
        points.append(
            {
                "point": point,
                "polls": len(moved),
                "cpu_per_judged_step_s": _per_step(moved),
                "cpu_per_poll_s": statistics.median(p.cpu_s for p in moved),
                "steps_per_poll": statistics.median(p.judged_steps for p in moved),
                "segments_read_median": statistics.median(p.segments_read for p in moved),
                "segments_total": moved[-1].segments_total,
                "attach_cpu_s": attach[0].cpu_s if attach else None,
                "share_of_step": _per_step(moved) / step_s,
            }
        )
    return points


def live_run(args: argparse.Namespace) -> SynthConfig:
    """The valid run a follower follows: no restarts or retries, a checkpoint every 100
    steps, from ``--steps``, ``--cells``, ``--buffer-size``, ``--samples-per-step`` and
    ``--flush-every`` (also ``online_replay.py``'s)."""
    from ftaudit.synth import SynthConfig

    return SynthConfig(
        steps=args.steps,
        cells=args.cells,
        ranks=1,
        buffer_size=args.buffer_size,
        samples_per_step=args.samples_per_step,
        restarts=0,
        retries=0,
        checkpoint_every=100,
        flush_every=args.flush_every,
        seed=0,
    )


def add_shape_arguments(
    parser: argparse.ArgumentParser, steps: int, cells: int, buffer_size: int, samples: int
) -> None:
    """The options :func:`live_run` reads, with these defaults (a flush every 5 steps)."""
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--cells", type=int, default=cells)
    parser.add_argument("--buffer-size", type=int, default=buffer_size)
    parser.add_argument("--samples-per-step", type=int, default=samples)
    parser.add_argument("--flush-every", type=int, default=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_shape_arguments(parser, 2000, 4, 65536, 256)
    parser.add_argument("--at", default="100,1000", help="sample points (steps), comma-separated")
    parser.add_argument("--every", type=int, default=10, help="poll every N steps")
    parser.add_argument("--polls", type=int, default=6, help="polls at each sample point")
    parser.add_argument("--step-s", type=float, default=1.0, help="a training step's duration")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--work", type=Path, default=None, help="where the run is written (a temporary folder)"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        help="write the run into KEEP/run and keep it (to profile polls on the same files)",
    )
    parser.add_argument("--plot-only", action="store_true")
    args = parser.parse_args()
    if args.plot_only:
        plot(json.loads((args.out / "online_bench.json").read_text())["summary"], args.out)
        return
    import duckdb
    import pyarrow

    config = live_run(args)
    at = [int(a) for a in args.at.split(",")]
    if max(at) + args.every * (args.polls + 1) >= args.steps:
        parser.error("the last sample point needs --every x (--polls + 1) steps after it")
    load_before = os.getloadavg()
    wall = time.perf_counter()
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)  # never into another run
        polls, writer_cpu = run(config, at, args.every, args.polls, args.keep)
    else:
        with tempfile.TemporaryDirectory(dir=args.work) as tmp:
            polls, writer_cpu = run(config, at, args.every, args.polls, Path(tmp))
    wall = time.perf_counter() - wall
    points = summarize(polls, args.step_s)
    first, last = points[0], points[-1]
    summary = {
        "config": asdict(config),
        "every": args.every,
        "step_s": args.step_s,
        "points": points,
        "late_over_early": last["cpu_per_judged_step_s"] / first["cpu_per_judged_step_s"],
        "writer_cpu_s": writer_cpu,
        "wall_s": wall,
        "versions": {
            "python": platform.python_version(),
            "pyarrow": pyarrow.__version__,
            "duckdb": duckdb.__version__,
        },
        "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} cores",
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "online_bench.json").write_text(
        json.dumps({"summary": summary, "polls": [asdict(p) for p in polls]}, indent=1) + "\n"
    )
    (args.out / "online_bench.md").write_text(_markdown(summary))
    print(_markdown(summary))
    try:
        plot(summary, args.out)
    except ImportError:
        print("no matplotlib here: redraw with --plot-only where it is installed")


def _markdown(s: dict) -> str:
    c = s["config"]
    rows = "".join(
        f"| {p['point']:,} | {p['cpu_per_judged_step_s'] * 1000:.1f} ms | "
        f"{p['share_of_step'] * 100:.1f}% | {p['cpu_per_poll_s'] * 1000:.0f} ms | "
        f"{p['steps_per_poll']:g} | {p['segments_read_median']:g} of {p['segments_total']:,} | "
        f"{p['attach_cpu_s']:.1f} s |\n"
        for p in s["points"]
    )
    load = ", ".join(f"{x:.1f}" for x in s["load_average"]["before"])
    return (
        "# Online verification: CPU per judged step along a live run\n\n"
        f"python {s['versions']['python']}, pyarrow {s['versions']['pyarrow']}, duckdb "
        f"{s['versions']['duckdb']}, {s['machine']}, load average at start {load}; "
        f"synth {c['steps']:,} steps x {c['cells']} cells, B = {c['buffer_size']:,}, "
        f"{c['samples_per_step']:,} samples/step, a segment per writer every "
        f"{c['flush_every']} steps; at each sample point a follower attaches and polls "
        f"every {s['every']} steps, in the writing process\n\n"
        "| step | CPU per judged step | of a 1 s step | CPU per poll | steps per poll "
        "| segments read per poll | attach (window loaded from the log) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{rows}\n"
        f"- last / first sample point: **{s['late_over_early']:.2f}x** (flat means about 1x)\n"
        f"- writing the run: {s['writer_cpu_s']:.0f} s CPU; the whole benchmark "
        f"{s['wall_s'] / 60:.0f} min wall\n"
    )


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = summary["points"]
    x = [p["point"] for p in points]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(x, [p["cpu_per_judged_step_s"] * 1000 for p in points], "o-", label="per judged step")
    share = 0.01 * summary["step_s"] * 1000
    ax.axhline(20, color="tab:red", linestyle="--", label="target: 20 ms")
    ax.axhline(
        share, color="tab:orange", linestyle=":", label=f"1% of a {summary['step_s']:g} s step"
    )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("step of the live run")
    ax.set_ylabel("CPU ms per judged step")
    c = summary["config"]
    ax.set_title(
        f"ft-verify online: {c['cells']} cells x B = {c['buffer_size']:,} x "
        f"{c['samples_per_step']:,} samples/step, a poll every {summary['every']} steps"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "online_bench.png", dpi=110)


if __name__ == "__main__":
    main()
