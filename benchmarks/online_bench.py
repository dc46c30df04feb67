"""Online verification: what one poll of a live run costs, early and late in the run.

Writes a valid synth run and polls an :class:`~ftaudit.verifier.online.OnlineVerifier`
in the writing process every ``--every`` steps (the driver's usage: a poll as steps
commit). Each poll's CPU time (``time.process_time``: this process, DuckDB's threads
included), the steps it judged and the segments it loaded are recorded. The result is a
ratio, not a wall time: the median cost per judged step in the last tenth of the run
against the first tenth after warm-up (flat: about 1x), and the per-step CPU against the
step duration a job would have (``--step-s``, 1 s by default).

Run: ``.venv/bin/python benchmarks/online_bench.py [--steps 2000] [--out benchmarks/results]``.
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

import duckdb
import pyarrow

from ftaudit.synth import SynthConfig, synthesize
from ftaudit.verifier.online import OnlineVerifier


@dataclass(frozen=True)
class PollCost:
    step: int
    """The step the writer had logged when the poll ran."""
    judged_steps: int
    segments_read: int
    segments_total: int
    cpu_s: float


def run(config: SynthConfig, every: int, root: Path) -> tuple[list[PollCost], float, float]:
    """Write the run, polling as it goes; (polls, final-verdict CPU s, writer CPU s)."""
    online = OnlineVerifier(root / "run")
    polls: list[PollCost] = []

    def after_step(step: int) -> None:
        if step % every:
            return
        started = time.process_time()
        poll = online.poll()
        cpu = time.process_time() - started
        if poll.judged is not None:
            first, last = poll.judged
            polls.append(
                PollCost(step, last - first + 1, poll.segments_read, online.segments_seen, cpu)
            )

    started = time.process_time()
    synthesize(root / "run", config, after_step=after_step)
    writing = time.process_time() - started - sum(p.cpu_s for p in polls)
    started = time.process_time()
    assert online.poll().finished
    final = time.process_time() - started
    assert online.passed(), "the valid run must verify"
    return polls, final, writing


def _per_step(polls: list[PollCost]) -> float:
    return statistics.median(p.cpu_s / p.judged_steps for p in polls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--cells", type=int, default=4)
    parser.add_argument("--buffer-size", type=int, default=65536)
    parser.add_argument("--samples-per-step", type=int, default=256)
    parser.add_argument("--every", type=int, default=10, help="poll every N steps")
    parser.add_argument("--step-s", type=float, default=1.0, help="a training step's duration")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args()
    config = SynthConfig(
        steps=args.steps,
        cells=args.cells,
        ranks=1,
        buffer_size=args.buffer_size,
        samples_per_step=args.samples_per_step,
        restarts=0,
        retries=0,
        checkpoint_every=100,
        flush_every=5,
        seed=0,
    )
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        polls, final_cpu, writer_cpu = run(config, args.every, Path(tmp))
    load_after = os.getloadavg()
    tenth = max(len(polls) // 10, 1)
    early = polls[1 : 1 + tenth]  # the first poll judges from step 0: warm-up
    late = polls[-tenth:]
    early_s, late_s = _per_step(early), _per_step(late)
    summary = {
        "config": asdict(config),
        "every": args.every,
        "polls": len(polls),
        "early_steps": [early[0].step, early[-1].step],
        "late_steps": [late[0].step, late[-1].step],
        "early_cpu_per_step_s": early_s,
        "late_cpu_per_step_s": late_s,
        "late_over_early": late_s / early_s,
        "late_segments_read_median": statistics.median(p.segments_read for p in late),
        "segments_total": polls[-1].segments_total,
        "per_step_share_of_step": late_s / args.step_s,
        "final_verdict_cpu_s": final_cpu,
        "writer_cpu_s": writer_cpu,
        "versions": {
            "python": platform.python_version(),
            "pyarrow": pyarrow.__version__,
            "duckdb": duckdb.__version__,
        },
        "machine": f"{platform.machine()}, {platform.system()}, {os.cpu_count()} cores",
        "load_average": {"before": load_before, "after": load_after},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "online_bench.json").write_text(
        json.dumps({"summary": summary, "polls": [asdict(p) for p in polls]}, indent=1) + "\n"
    )
    (args.out / "online_bench.md").write_text(_markdown(summary))
    print(_markdown(summary))


def _markdown(s: dict) -> str:
    c = s["config"]
    return (
        "# Online verification: CPU per judged step, early and late in a live run\n\n"
        f"python {s['versions']['python']}, pyarrow {s['versions']['pyarrow']}, duckdb "
        f"{s['versions']['duckdb']}, {s['machine']}, load average {s['load_average']}; "
        f"synth {c['steps']} steps x {c['cells']} cells, B = {c['buffer_size']:,}, "
        f"{c['samples_per_step']} samples/step, a segment per writer every "
        f"{c['flush_every']} steps; a poll every {s['every']} steps, in the writing "
        "process\n\n"
        "| | steps | CPU per judged step | segments read per poll (median) |\n"
        "|---|---|---:|---:|\n"
        f"| early | {s['early_steps'][0]}-{s['early_steps'][1]} | "
        f"{s['early_cpu_per_step_s'] * 1000:.1f} ms | |\n"
        f"| late | {s['late_steps'][0]}-{s['late_steps'][1]} | "
        f"{s['late_cpu_per_step_s'] * 1000:.1f} ms | {s['late_segments_read_median']:g} "
        f"of {s['segments_total']} |\n\n"
        f"- late / early: **{s['late_over_early']:.2f}x** (flat means about 1x)\n"
        f"- per judged step, late: **{s['per_step_share_of_step'] * 100:.1f}%** of a "
        "1-second step\n"
        f"- the final verdict (the whole log, offline rules) when the run finished: "
        f"{s['final_verdict_cpu_s']:.1f} s CPU; writing the run: {s['writer_cpu_s']:.1f} s CPU\n"
    )


if __name__ == "__main__":
    main()
