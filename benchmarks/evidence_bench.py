"""What the issue-12 evidence costs per training step, next to the witness itself.

Two CPU models, each trained for a number of steps three ways, same data, same seed:

- ``plain``: forward, backward, optimizer step (no ftaudit);
- ``witness``: the witness installed, ``after_optimizer_step`` reduced to what it did
  before issue 12 (snapshot the nonzero rows, zero the stale ones, log, flush);
- ``evidence``: the full hooks of today: the witness gradient before the optimizer step
  (``before_optimizer_step``), the step counters and the parameter-manifest check in
  ``after_optimizer_step``, and a registered LR scheduler.

Checksums are left out of all three (they cost the same hashing with or without the new
``group/*`` and ``stateful/*`` entries, which are measured apart: ``whole-state hashes``).
Reported: median step time of each variant, and the overhead ratios.

Models: ``demo`` is the demo's TinyLM (2 layers, hidden 32, 16 samples of 16 tokens);
``transformer`` a CPU transformer LM (4 layers, hidden 128, 8 samples of 64 tokens).

Run: ``.venv/bin/python benchmarks/evidence_bench.py [--steps N] [--out FILE]``
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from ftaudit.demo.config import ModelConfig
from ftaudit.demo.model import TinyLM
from ftaudit.eventlog import WitnessSnapshot, WriterOptions
from ftaudit.trainer_hooks import DriverSession
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids
from ftaudit.trainer_hooks.torch.clearing import as_runs
from ftaudit.trainer_hooks.torch.state_scalars import group_hashes, stateful_hashes

B = 4096
VARIANTS = ("plain", "witness", "evidence")


@dataclass(frozen=True)
class Shape:
    name: str
    model: ModelConfig
    batch: int
    seq: int


SHAPES = (
    Shape("demo", ModelConfig(vocab_size=48, hidden=32, layers=2, heads=2, mlp_ratio=2), 16, 16),
    Shape(
        "transformer",
        ModelConfig(vocab_size=512, hidden=128, layers=4, heads=4, mlp_ratio=4),
        8,
        64,
    ),
)


def _witness_only(hooks: TrainerHooks, stale: list[int]) -> None:
    """``after_optimizer_step`` as it was before issue 12: rows, clear, log, flush."""
    for instance, nonzero in hooks.clearer.snapshot().items():
        hooks.writer.log(
            WitnessSnapshot(
                cell=hooks.cell, instance=instance, nonzero_ids=nonzero, stale_ids=as_runs(stale)
            )
        )
    hooks.clearer.zero(stale)
    hooks.writer.flush()


def measure(shape: Shape, variant: str, steps: int, run_dir: Path) -> list[float]:
    torch.manual_seed(0)
    model = TinyLM(shape.model, shape.seq)
    if variant != "plain":
        install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    hooks = driver = None
    if variant != "plain":
        driver = DriverSession.start(
            run_dir, buffer_size=B, options=WriterOptions(fsync=False, flush_interval_s=3600)
        )
        hooks = TrainerHooks.attach(
            run_dir,
            driver.incarnation,
            cell=0,
            rank=0,
            model=model,
            optimizer=optimizer,
            options=WriterOptions(fsync=False, flush_interval_s=3600),
            stateful={"lr_scheduler": scheduler} if variant == "evidence" else None,
        )
    gen = torch.Generator().manual_seed(1)
    times = []
    for step in range(steps):
        toks = torch.randint(0, shape.model.vocab_size, (shape.batch, shape.seq + 1), generator=gen)
        inputs, targets = toks[:, :-1], toks[:, 1:]
        ids = list(range(step * shape.batch, (step + 1) * shape.batch))
        stale = [(i + shape.batch) % B for i in ids]
        started = time.perf_counter()
        optimizer.zero_grad()
        if hooks is None:
            loss = F.cross_entropy(model(inputs).transpose(1, 2), targets)
            loss.backward()
            optimizer.step()
            scheduler.step()
        else:
            with hooks.step(step, 0):
                with hooks.batch(sample_token_ids([i % B for i in ids], shape.seq)):
                    loss = F.cross_entropy(model(inputs).transpose(1, 2), targets)
                    loss.backward()
                if variant == "evidence":
                    hooks.before_optimizer_step()
                optimizer.step()
                scheduler.step()
                if variant == "evidence":
                    hooks.after_optimizer_step(stale)
                else:
                    _witness_only(hooks, stale)
        times.append(time.perf_counter() - started)
    if hooks is not None:
        hooks.close()
    if driver is not None:
        driver.finish()
    return times[2:]  # the first steps warm up allocators and caches


def whole_state_hash_ms(shape: Shape, repeats: int = 50) -> float:
    torch.manual_seed(0)
    model = TinyLM(shape.model, shape.seq)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    started = time.perf_counter()
    for _ in range(repeats):
        group_hashes(optimizer)
        stateful_hashes({"lr_scheduler": scheduler})
    return (time.perf_counter() - started) / repeats * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = []
    for shape in SHAPES:
        # rounds outside, variants inside: load drifting on a shared machine hits all three
        runs: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for _ in range(args.rounds):
            for variant in VARIANTS:
                with tempfile.TemporaryDirectory() as tmp:
                    times = measure(shape, variant, args.steps, Path(tmp) / "r")
                runs[variant].append(statistics.median(times))
        medians = {v: min(r) * 1e3 for v, r in runs.items()}
        row = {
            "model": shape.name,
            "plain_ms": round(medians["plain"], 3),
            "witness_ms": round(medians["witness"], 3),
            "evidence_ms": round(medians["evidence"], 3),
            "witness_over_plain": round(medians["witness"] / medians["plain"], 4),
            "evidence_over_witness": round(medians["evidence"] / medians["witness"], 4),
            "whole_state_hashes_ms": round(whole_state_hash_ms(shape), 4),
        }
        results.append(row)
        print(json.dumps(row))
    meta = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "machine": platform.machine(),
        "threads": 1,
        "steps": args.steps,
        "rounds": args.rounds,
        "buffer_size": B,
    }
    if args.out is not None:
        args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
