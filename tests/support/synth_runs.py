"""Small synthetic runs for tests: one base shape, and each test says only how its run differs.

The synth generator writes real runs (real writers, real flushes), fast enough for the fast
suite when small. :func:`small_synth` starts from two cells of one rank, a 1,024-id buffer,
64 samples a step, no restart or retry, a checkpoint every 8 steps and a flush every 2.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ftaudit.synth import SynthConfig

BASE = SynthConfig(
    steps=8,
    cells=2,
    ranks=1,
    buffer_size=1024,
    samples_per_step=64,
    restarts=0,
    retries=0,
    checkpoint_every=8,
    flush_every=2,
    seed=0,
)


def small_synth(steps: int, **changes: Any) -> SynthConfig:
    """:data:`BASE` with ``steps`` and the ``changes`` a test needs."""
    return dataclasses.replace(BASE, steps=steps, **changes)


LOOKBACK = small_synth(40, restarts=2, retries=3, flush_every=3, seed=1)
"""Two restarts (re-run steps judged again), retried steps, many small segments; keep =
716 ids = 11 steps of lookback: what incremental and online verification must get right."""
