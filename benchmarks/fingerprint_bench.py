"""What fingerprinting the fed samples costs, against the training step it rides on.

For each configuration it times, in one process with one torch thread (median of many
repeats, after warm-up):

- **step**: one CPU training step of the demo's transformer (``TinyLM``: forward,
  backward, Adam step) on a batch of token ids;
- **hook**: ``TrainerHooks.log_fingerprints`` on the same batch tensor, i.e. everything
  the hooks add per step for data identity (BLAKE2b of every row's canonical bytes, the
  ``sample_fingerprints`` event, the buffered ``log``).

The ratio hook / step is the overhead. ``demo`` is the demo's own shape (8 samples of 17
tokens per cell); the larger ones show how it scales with the batch.

Run: ``.venv/bin/python benchmarks/fingerprint_bench.py [--out FILE.md]``
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ftaudit.demo.config import ModelConfig
from ftaudit.demo.model import TinyLM
from ftaudit.eventlog import WriterOptions
from ftaudit.trainer_hooks import DriverSession
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids


@dataclass(frozen=True)
class Shape:
    name: str
    batch: int
    seq: int
    model: ModelConfig


SHAPES = (
    Shape("demo", 8, 17, ModelConfig()),
    Shape("wider", 32, 129, ModelConfig(vocab_size=512, hidden=128, layers=4, heads=4)),
    Shape("long", 16, 1025, ModelConfig(vocab_size=1024, hidden=128, layers=4, heads=4)),
)


def _median_s(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(shape: Shape, run_dir: Path, repeats: int) -> tuple[float, float]:
    torch.manual_seed(0)
    model = TinyLM(shape.model, shape.seq)
    install_witnesses(model, 1024, layers="layers")  # the step runs with witnesses, as in the demo
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, shape.model.vocab_size, (shape.batch, shape.seq))

    driver = DriverSession.start(run_dir, buffer_size=64)
    hooks = TrainerHooks.attach(
        run_dir,
        driver.incarnation,
        cell=0,
        rank=0,
        model=model,
        optimizer=optimizer,
        options=WriterOptions(fsync=False),
    )
    ids = sample_token_ids(list(range(shape.batch)), shape.seq - 1)

    def step() -> None:
        with hooks.batch(ids):
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1)
            )
            optimizer.zero_grad()
            loss.backward()
        optimizer.step()

    positions = np.arange(shape.batch)

    def hook() -> None:
        with hooks.step(0, 0):
            hooks.log_fingerprints(positions, tokens)

    step_s = _median_s(step, repeats)
    hook_s = _median_s(hook, repeats * 10)
    hooks.close()
    driver.finish()
    return step_s, hook_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            step_s, hook_s = measure(shape, Path(tmp) / shape.name, args.repeats)
            rows.append(
                f"| {shape.name} | {shape.batch} x {shape.seq} | {shape.model.hidden} x "
                f"{shape.model.layers} | {step_s * 1e3:.2f} ms | {hook_s * 1e6:.1f} us | "
                f"{100 * hook_s / step_s:.2f}% |"
            )
            print(rows[-1], flush=True)
    table = "\n".join(
        [
            "| shape | batch (samples x tokens) | model (hidden x layers) | step (median) "
            "| log_fingerprints (median) | overhead |",
            "|---|---|---|---:|---:|---:|",
            *rows,
        ]
    )
    versions = (
        f"Python {platform.python_version()}, torch {torch.__version__}, numpy "
        f"{np.__version__}, 1 torch thread, {platform.machine()} ({platform.processor() or 'cpu'})"
    )
    text = f"# Fingerprint overhead\n\n{versions}\n\n{table}\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
