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

``--every 10,50`` follows each sample point with one follower per poll interval, on the
same steps of the same run: a poll costs a fixed part (listing, the rules' queries)
and a part per judged step (its segments, its samples), and the intervals' costs give
both (:func:`cost_model`), so the table says which interval keeps the cost under 1% of a
step, and how late (that many steps) a bad step is then found.

Run: ``.venv/bin/python benchmarks/online_bench.py [--steps 10000 --at 100,1000,10000]
[--every 10,50]
[--out benchmarks/results] [--work DIR | --keep DIR] [--profile DIR]``; ``--plot-only``
redraws the PNG from the JSON (needs matplotlib: the ``bench`` extra). ``--keep`` leaves
the run on disk; ``--profile`` writes each follower's polls after attaching as a cProfile
file (the profiler's overhead is then in the CPU measured, most in loops of many small
Python calls: compare the profiles, not those figures).
"""

from __future__ import annotations

import argparse
import json
import math
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
    every: int
    """The follower's poll interval (steps)."""
    step: int
    """The step the writer had logged when the poll ran."""
    attach: bool
    """The first poll after attaching: the window loaded from the log."""
    judged_steps: int
    segments_read: int
    segments_total: int
    cpu_s: float


def run(
    config: SynthConfig,
    at: list[int],
    every: list[int],
    polls: int,
    root: Path,
    profile: Path | None = None,
) -> tuple[list[PollCost], float]:
    """Write the run, following it around each sample point, a follower per poll interval
    in ``every``, all in one process on the same steps; (polls, writer CPU s).

    ``profile``: a folder where each follower's polls after attaching are profiled
    (``cProfile``), one ``poll_<point>_every_<interval>.prof`` each; the profiler's
    overhead is in the CPU measured then."""
    import cProfile

    from ftaudit.synth import synthesize
    from ftaudit.verifier.online import OnlineVerifier

    out: list[PollCost] = []
    profilers: dict[tuple[int, int], cProfile.Profile] = {}
    # (point, interval) -> (verifier, polls left); a poll runs alone, so its CPU is its own
    followers: dict[tuple[int, int], tuple[OnlineVerifier, int]] = {}

    def after_step(step: int) -> None:
        if step in at:
            for interval in every:
                online = OnlineVerifier(root / "run", since_step=step - interval)
                followers[(step, interval)] = (online, polls)
                if profile is not None:
                    profilers[(step, interval)] = cProfile.Profile()
        for (point, interval), (online, left) in list(followers.items()):
            if step % interval:
                continue
            profiler = profilers.get((point, interval)) if left < polls else None
            if profiler is not None:
                profiler.enable()
            started = time.process_time()
            poll = online.poll()
            cpu = time.process_time() - started
            if profiler is not None:
                profiler.disable()
            if poll.judged is not None:
                first, last = poll.judged
                out.append(
                    PollCost(
                        point,
                        interval,
                        step,
                        left == polls,
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
                del followers[(point, interval)]
                if profiler is not None:
                    profiler.dump_stats(profile / f"poll_{point}_every_{interval}.prof")
            else:
                followers[(point, interval)] = (online, left)

    started = time.process_time()
    synthesize(root / "run", config, after_step=after_step)
    writing = time.process_time() - started - sum(p.cpu_s for p in out)
    return out, writing


def _per_step(polls: list[PollCost]) -> float:
    return statistics.median(p.cpu_s / p.judged_steps for p in polls)


def summarize(polls: list[PollCost], step_s: float) -> list[dict]:
    """One row per poll interval and sample point: medians of the polls after attaching."""
    points = []
    for every, point in sorted({(p.every, p.point) for p in polls}):
        mine = [p for p in polls if p.point == point and p.every == every]
        moved = [p for p in mine if not p.attach]
        attach = [p for p in mine if p.attach]
        points.append(
            {
                "point": point,
                "every": every,
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


def cost_model(points: list[dict], step_s: float) -> list[dict]:
    """Per sample point polled at two or more intervals: a poll's CPU as ``fixed + per_step
    x steps``, fitted (least squares) to each interval's median poll. ``fixed`` is what a
    poll costs whatever it judges (listing, the rules' queries), ``per_step`` what each
    judged step adds (its segments read, its samples checked); polling every N steps
    costs ``fixed / N + per_step`` a step and finds a bad step up to N steps late. The
    least N under 1% of ``step_s`` is given where ``per_step`` alone is under it."""
    model = []
    for point in sorted({p["point"] for p in points}):
        mine = [p for p in points if p["point"] == point]
        if len({p["steps_per_poll"] for p in mine}) < 2:
            continue
        xs = [p["steps_per_poll"] for p in mine]
        ys = [p["cpu_per_poll_s"] for p in mine]
        mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
        per_step = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
            (x - mean_x) ** 2 for x in xs
        )
        fixed = mean_y - per_step * mean_x
        budget = 0.01 * step_s - per_step
        model.append(
            {
                "point": point,
                "fixed_per_poll_s": fixed,
                "per_judged_step_s": per_step,
                "least_every_for_1_percent": math.ceil(fixed / budget) if budget > 0 else None,
            }
        )
    return model


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
    parser.add_argument(
        "--every",
        default="10",
        help="poll every N steps; several, comma-separated: a follower each, same steps",
    )
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
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="profile each follower's polls after attaching (cProfile), one file each, here",
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
    every = [int(e) for e in args.every.split(",")]
    if max(at) + max(every) * (args.polls + 1) >= args.steps:
        parser.error("the last sample point needs --every x (--polls + 1) steps after it")
    load_before = os.getloadavg()
    wall = time.perf_counter()
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=False)  # never into another run
        polls, writer_cpu = run(config, at, every, args.polls, args.keep, args.profile)
    else:
        with tempfile.TemporaryDirectory(dir=args.work) as tmp:
            polls, writer_cpu = run(config, at, every, args.polls, Path(tmp), args.profile)
    wall = time.perf_counter() - wall
    points = summarize(polls, args.step_s)
    summary = {
        "config": asdict(config),
        "every": every,
        "step_s": args.step_s,
        "points": points,
        "late_over_early": {
            str(interval): _late_over_early(points, interval) for interval in every
        },
        "cost_model": cost_model(points, args.step_s),
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


def _late_over_early(points: list[dict], every: int) -> float:
    mine = [p for p in points if p["every"] == every]
    return mine[-1]["cpu_per_judged_step_s"] / mine[0]["cpu_per_judged_step_s"]


def _markdown(s: dict) -> str:
    c = s["config"]
    rows = "".join(
        f"| {p['every']} | {p['point']:,} | {p['cpu_per_judged_step_s'] * 1000:.1f} ms | "
        f"{p['share_of_step'] * 100:.1f}% | {p['cpu_per_poll_s'] * 1000:.0f} ms | "
        f"{p['steps_per_poll']:g} | {p['segments_read_median']:g} of {p['segments_total']:,} | "
        f"{p['attach_cpu_s']:.1f} s |\n"
        for p in s["points"]
    )
    load = ", ".join(f"{x:.1f}" for x in s["load_average"]["before"])
    flat = "".join(
        f"- polling every {every}: last / first sample point **{ratio:.2f}x** "
        "(flat means about 1x)\n"
        for every, ratio in s["late_over_early"].items()
    )
    text = (
        "# Online verification: CPU per judged step along a live run\n\n"
        f"python {s['versions']['python']}, pyarrow {s['versions']['pyarrow']}, duckdb "
        f"{s['versions']['duckdb']}, {s['machine']}, load average at start {load}; "
        f"synth {c['steps']:,} steps x {c['cells']} cells, B = {c['buffer_size']:,}, "
        f"{c['samples_per_step']:,} samples/step, a segment per writer every "
        f"{c['flush_every']} steps; at each sample point a follower per poll interval "
        "attaches and polls, in the writing process\n\n"
        "| poll every (steps) | step | CPU per judged step | of a 1 s step | CPU per poll "
        "| steps per poll | segments read per poll | attach (window loaded from the log) |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        f"{rows}\n{flat}"
        f"- writing the run: {s['writer_cpu_s']:.0f} s CPU; the whole benchmark "
        f"{s['wall_s'] / 60:.0f} min wall\n"
    )
    if s["cost_model"]:
        text += (
            "\nA poll's CPU as fixed + per judged step x steps (fitted over the intervals):\n\n"
            "| step | fixed per poll | per judged step | least poll interval under 1% |\n"
            "|---:|---:|---:|---:|\n"
        )
        for m in s["cost_model"]:
            least = m["least_every_for_1_percent"]
            text += (
                f"| {m['point']:,} | {m['fixed_per_poll_s'] * 1000:.0f} ms | "
                f"{m['per_judged_step_s'] * 1000:.1f} ms | "
                f"{'none' if least is None else f'{least} steps'} |\n"
            )
    return text


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # a JSON written before several intervals were followed at once has one, at the top
    intervals = summary["every"] if isinstance(summary["every"], list) else [summary["every"]]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for every in intervals:
        points = [p for p in summary["points"] if p.get("every", every) == every]
        ax.plot(
            [p["point"] for p in points],
            [p["cpu_per_judged_step_s"] * 1000 for p in points],
            "o-",
            label=f"per judged step, a poll every {every} steps",
        )
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
        f"{c['samples_per_step']:,} samples/step"
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "online_bench.png", dpi=110)


if __name__ == "__main__":
    main()
