"""A run that feeds fingerprinted items (FT008's cases and the data-identity views read it).

Item ``i`` of the 12-item dataset is the token row ``[i, i+1, i+2, i+3]``; ``FP[i]`` its
fingerprint (16 are made: items 12..15 are outside the dataset). Two cells split each
step's samples, half each, like the demo.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ftaudit.dataset import DatasetManifest, fingerprint
from ftaudit.eventlog import CellOutcome
from tests.support.builder import Incarnation, RunBuilder

FP = [fingerprint(np.arange(i, i + 4)) for i in range(16)]
N = 12
MANIFEST = DatasetManifest.of(FP[:N], "cases_ft008")


def step(
    run: Incarnation,
    s: int,
    positions: Sequence[int],
    *,
    content: Sequence[int] | None = None,
    cells: dict[int, CellOutcome] | None = None,
    attempt: int = 0,
) -> None:
    """Train ``positions`` in step ``s``: cell 0 feeds the first half, cell 1 the second.

    ``content[k]`` is the item whose data position ``k`` really fed (default: its own).
    """
    content = list(positions) if content is None else list(content)
    run.train(s, list(positions), attempt=attempt, cells=cells)
    half = len(positions) // 2
    for cell, part in ((0, slice(0, half)), (1, slice(half, None))):
        if cells is not None and cells[cell].errored:
            continue
        run.fed(s, positions[part], [FP[c] for c in content[part]], cell=cell, attempt=attempt)


def start(b: RunBuilder, *, manifest: bool = True, **kw: object) -> Incarnation:
    run = b.start(dataset_size=N, deterministic_order=True, **kw)  # type: ignore[arg-type]
    if manifest:
        run.declare(MANIFEST)
    return run
