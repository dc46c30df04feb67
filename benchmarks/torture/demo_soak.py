"""Soak: the demo (Ray training on torchft's Managers) under random faults; every run must verify.

Per seed, a random schedule: faults arrive with exponential inter-arrival times (in steps),
each of a random mode (SIGKILL, exit, segfault, hang, a discarded attempt) at a random call
site of a random cell, never taking down every cell of one step (the last alive cell is
never killed); every other seed one step retried 3 to 5 times; and by ``seed % 5`` the
job (driver) SIGKILLed mid-step once at a random step, once before the first checkpoint
(the restart begins from nothing), once and again in the resumed incarnation's first step,
twice in successive incarnations, or never. ``ftaudit demo`` resumes a killed job from the
latest checkpoint. ``ftaudit demo`` must exit 0.

With ``--follow``, ``ft-verify --follow`` tails each run while it trains, through its job
kills and resumes: what it reports live, even provisional, the offline report must hold
(a warning of the run, say), and it must end with the offline report (``ft-verify
--format json``, timings aside).

Run: ``.venv/bin/python benchmarks/torture/demo_soak.py [--seeds 20] [--follow] [--out
DIR]`` (each seed takes one to five minutes on 2 cores). Failing runs are kept in
``--out``. ``tests/reliability/test_demo_soak.py`` runs a short version in CI, followed.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

CELL_MODES = ("sigkill", "exit", "segfault", "hang", "discard")
CELL_SITES = ("before_allreduce", "after_commit", "after_step")


JOB_KILLS = ("random", "before_first_checkpoint", "first_step_of_incarnation", "twice", "none")
"""The job-kill scenario of each seed, by ``seed % 5``: one kill mid-run at a random step;
one before the first checkpoint (the restart begins from nothing); one, then another in the
resumed incarnation's first step; two kills at random steps of successive incarnations; none."""

CHECKPOINT_EVERY = 3
"""``ftaudit demo``'s default: checkpoints after steps 2, 5, 8, 11."""


def resume_step(kill: int) -> int:
    """The first step of the incarnation that resumes after a job kill in step ``kill``."""
    saved = [s for s in range(kill) if (s + 1) % CHECKPOINT_EVERY == 0]
    return saved[-1] + 1 if saved else 0


def job_kills(seed: int, rng: random.Random, steps: int) -> list[dict]:
    """The seed's job kills (the driver's SIGKILL mid-step), each in its incarnation."""
    scenario = JOB_KILLS[seed % len(JOB_KILLS)]

    def kill(step: int, incarnation: int) -> dict:
        return {
            "step": step,
            "mode": "sigkill",
            "target": "driver",
            "at": "mid_step",
            "incarnation": incarnation,
        }

    if scenario == "random":
        return [kill(rng.randint(4, steps - 2), 0)]
    if scenario == "before_first_checkpoint":
        return [kill(rng.randint(0, CHECKPOINT_EVERY - 2), 0)]
    if scenario == "first_step_of_incarnation":
        first = rng.randint(4, steps - 3)
        return [kill(first, 0), kill(resume_step(first), 1)]
    if scenario == "twice":
        first = rng.randint(3, steps - 4)
        return [kill(first, 0), kill(rng.randint(first + 1, steps - 2), 1)]
    return []


def retries(seed: int, rng: random.Random, steps: int, cells: int, kills: list[dict]) -> list[dict]:
    """Every other seed: one step of the last incarnation retried 3 to 5 times (discards on
    alternating cells), so the retries end up in the committed history."""
    if seed % 2:
        return []
    incarnation = len(kills)
    first = resume_step(kills[-1]["step"]) if kills else 0
    step, attempts = rng.randrange(first, steps), rng.randint(3, 5)
    cell = rng.randrange(cells)
    return [
        {"step": step, "cell": (cell + a) % cells, "attempt": a, "incarnation": incarnation}
        for a in range(attempts - 1)
    ]


def schedule(seed: int, *, steps: int, cells: int, rate: float) -> dict[str, list[dict]]:
    """A random fault schedule for one demo run (the demo's ``--faults`` JSON)."""
    rng = random.Random(seed)
    faults: list[dict] = []
    discards: list[dict] = []
    hit: dict[int, set[int]] = {}  # step -> cells already faulted at attempt 0
    t = rng.expovariate(rate)
    while t < steps:
        step = int(t)
        t += rng.expovariate(rate)
        free = [c for c in range(cells) if c not in hit.setdefault(step, set())]
        if len(free) <= 1:  # the last alive cell of this step is never touched
            continue
        cell = rng.choice(free)
        hit[step].add(cell)
        mode = rng.choice(CELL_MODES)
        if mode == "discard":
            discards.append({"step": step, "cell": cell})
        elif mode == "hang":
            faults.append({"step": step, "mode": "hang", "cell": cell, "at": "before_allreduce"})
        elif mode == "exit":
            site = rng.choice(CELL_SITES)
            code = 0 if site == "after_step" else 3
            faults.append(
                {"step": step, "mode": "exit", "exit_code": code, "cell": cell, "at": site}
            )
        else:
            faults.append({"step": step, "mode": mode, "cell": cell, "at": rng.choice(CELL_SITES)})
    kills = job_kills(seed, rng, steps)
    discards += retries(seed, rng, steps, cells, kills)
    faults += kills
    return {"faults": faults, "discards": discards}


RAY_DID_NOT_START = "The current node timed out during startup"
"""Ray gives a new node 30 s (hard-coded) to register with its GCS; at load averages of
30 it can take longer and ``ray.init`` fails before any training. Such a run has no
verdict: it is launched again (up to ``--ray-starts`` times) and counted apart."""


FOLLOWER_TIMEOUT_S = 300
"""How long a follower may take, once the demo exited, to judge the finished run."""


def run_demo(
    cmd: list[str], run_dir: Path, timeout: int, starts: int, *, follow: bool = False
) -> tuple[int, str, int]:
    """One soak run: (exit code, output, launches whose Ray node did not start). With
    ``follow``, a follower that disagrees with the offline verdict makes the code -2."""
    code, log = -1, ""
    for failed in range(starts):
        shutil.rmtree(run_dir, ignore_errors=True)
        follower = _follower(run_dir) if follow else None
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            _stop(follower)
            return -1, f"timed out after {timeout} s\n{exc.stderr or ''}", failed
        code, log = done.returncode, done.stdout + done.stderr
        if RAY_DID_NOT_START not in log:
            if follower is not None:
                disagrees = _disagreement(follower, run_dir)
                if disagrees:
                    return -2, f"{log}\nfollower: {disagrees}", failed
            return code, log, failed
        _stop(follower)
    return code, log, starts


def _follower(run_dir: Path) -> subprocess.Popen[str]:
    """``ft-verify --follow`` of ``run_dir``, started before the demo creates it."""
    ft_verify = Path(sys.executable).with_name("ft-verify")
    return subprocess.Popen(
        [str(ft_verify), "--follow", "--format", "json", "--interval", "0.5", str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(follower: subprocess.Popen[str] | None) -> None:
    if follower is not None:
        follower.kill()
        follower.communicate()


def _disagreement(follower: subprocess.Popen[str], run_dir: Path) -> str:
    """Why the follower's verdicts disagree with the offline verifier's ("": they agree)."""
    try:
        out, said = follower.communicate(timeout=FOLLOWER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(follower)
        return f"did not finish within {FOLLOWER_TIMEOUT_S} s of the demo's exit"
    ft_verify = Path(sys.executable).with_name("ft-verify")
    offline = subprocess.run(
        [str(ft_verify), "--format", "json", str(run_dir)], capture_output=True, text=True
    )
    if follower.returncode != offline.returncode:
        return f"exit {follower.returncode}, offline {offline.returncode}\n{said}"
    try:
        live, whole = json.loads(out), json.loads(offline.stdout)
    except json.JSONDecodeError:
        return f"no final report\n{said}"
    for report in (live, whole):
        for result in report["results"]:
            result.pop("seconds", None)
    if live != whole:
        return f"its final report differs from the offline one\n{said}"
    unconfirmed = _reported_live(said) - _reported(whole)
    return f"reported live, not offline: {sorted(unconfirmed)}\n{said}" if unconfirmed else ""


def _reported(report: dict) -> set[str]:
    """A report's violations as the follower says them: rule, severity and location."""
    from ftaudit.verifier.findings import Location
    from ftaudit.verifier.render.describe import location_text

    out = set()
    for result in report["results"]:
        for v in result["violations"]:
            where = location_text(Location(**v["location"]))
            out.add(f"{result['code']} {v['severity']}{' ' + where if where else ''}")
    return out


def _reported_live(said: str) -> set[str]:
    """The violations a follower reported while the run was live (its stderr lines
    ``  CODE severity location: message``), as :func:`_reported` names them."""
    return {line.strip().split(": ", 1)[0] for line in said.splitlines() if line.startswith("  FT")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--cells", type=int, default=3)
    parser.add_argument("--rate", type=float, default=0.5, help="faults per step")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per run")
    parser.add_argument("--out", type=Path, default=Path("runs/soak"))
    parser.add_argument("--ray-starts", type=int, default=3, help="launches per run at most")
    parser.add_argument(
        "--follow", action="store_true", help="tail each run with ft-verify --follow as well"
    )
    args = parser.parse_args()
    ftaudit = Path(sys.executable).with_name("ftaudit")
    args.out.mkdir(parents=True, exist_ok=True)
    outcomes: Counter[str] = Counter()
    modes: Counter[str] = Counter()
    ray_timeouts = 0
    print("| seed | faults | discards (attempts) | job kills (step@incarnation) | exit | seconds |")
    print("|---:|---|---:|---|---:|---:|")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        plan = schedule(seed, steps=args.steps, cells=args.cells, rate=args.rate)
        run_dir = args.out / f"seed{seed:03d}"
        started = time.perf_counter()
        cmd = [
            str(ftaudit),
            "demo",
            str(run_dir),
            "--seed",
            str(seed),
            "--cells",
            str(args.cells),
            "--steps",
            str(args.steps),
            "--faults",
            json.dumps(plan),
        ]
        code, log, ray_failed = run_demo(
            cmd, run_dir, args.timeout, args.ray_starts, follow=args.follow
        )
        ray_timeouts += ray_failed
        seconds = time.perf_counter() - started
        cell_faults = [f for f in plan["faults"] if f.get("target") != "driver"]
        job_kill = [
            f"{f['step']}@i{f['incarnation']}"
            for f in plan["faults"]
            if f.get("target") == "driver"
        ]
        attempts = 1 + max((d.get("attempt", 0) for d in plan["discards"]), default=-1)
        modes.update(f["mode"] for f in cell_faults)
        modes["discard"] += len(plan["discards"])
        modes["job kill"] += len(job_kill)
        outcomes["verified" if code == 0 else f"exit {code}"] += 1
        shown = ", ".join(f"{f['mode']}@{f['step']}c{f['cell']}:{f['at']}" for f in cell_faults)
        print(
            f"| {seed} | {shown or '-'} | {len(plan['discards'])} ({attempts + 1}) | "
            f"{', '.join(job_kill) or '-'} | {code} | {seconds:.0f} |",
            flush=True,
        )
        (run_dir.parent / f"seed{seed:03d}.log").write_text(f"{' '.join(cmd)}\nexit {code}\n{log}")
        if code == 0:
            shutil.rmtree(run_dir, ignore_errors=True)
    print(
        f"# demo_soak: {dict(outcomes)}; faults injected: {dict(modes)}; launches relaunched "
        f"because Ray's node did not start: {ray_timeouts}"
    )
    sys.exit(0 if outcomes["verified"] == args.seeds else 1)


if __name__ == "__main__":
    main()
