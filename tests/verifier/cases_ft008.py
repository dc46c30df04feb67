"""Cases of FT008 data-identity (issue 13 item 3), as data: pass and fail.

Item ``i`` of the 12-item dataset is the token row ``[i, i+1, i+2, i+3]``; ``FP[i]`` its
fingerprint. Two cells split each step's four samples, two each, like the demo.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ftaudit.dataset import DatasetManifest, fingerprint
from tests.support.builder import ERRORED, NORMAL, Incarnation, RunBuilder
from tests.verifier.cases import Case, Expect

FP = [fingerprint(np.arange(i, i + 4)) for i in range(16)]
N = 12
MANIFEST = DatasetManifest.of(FP[:N], "cases_ft008")


def step(
    run: Incarnation,
    s: int,
    positions: Sequence[int],
    *,
    content: Sequence[int] | None = None,
    cells: dict | None = None,
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


def clean(b: RunBuilder) -> None:
    run = start(b)
    step(run, 0, [0, 1, 2, 3])
    step(run, 1, [4, 5, 6, 7])
    run.finish()


def clean_without_manifest(b: RunBuilder) -> None:
    run = start(b, manifest=False)
    step(run, 0, [0, 1, 2, 3])
    run.finish()


def no_fingerprints(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2, 3])
    run.finish()


def peer_shard(b: RunBuilder) -> None:
    """Cell 1 reads cell 0's items under its own sample indices."""
    run = start(b)
    step(run, 0, [0, 1, 2, 3], content=[0, 1, 0, 1])
    run.finish()


def peer_shard_without_manifest(b: RunBuilder) -> None:
    run = start(b, manifest=False)
    step(run, 0, [0, 1, 2, 3], content=[0, 1, 0, 1])
    run.finish()


def overlapping_shards(b: RunBuilder) -> None:
    """Both cells train position 2 (an inclusive shard end)."""
    run = start(b)
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1, 2], FP[0:3], cell=0)
    run.fed(0, [2, 3], FP[2:4], cell=1)
    run.finish()


def cells_disagree(b: RunBuilder) -> None:
    run = start(b, manifest=False)
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1, 2], FP[0:3], cell=0)
    run.fed(0, [2, 3], [FP[9], FP[3]], cell=1)
    run.finish()


def tensor_parallel_ranks(b: RunBuilder) -> None:
    """Two ranks of one cell feed the same samples (tensor parallel): not trained twice."""
    run = start(b)
    run.train(0, [0, 1, 2, 3])
    for rank in (0, 1):
        run.fed(0, [0, 1, 2, 3], FP[0:4], cell=0, rank=rank)
    run.finish()


def _replayed(b: RunBuilder, content: list[int], *, deterministic: bool) -> None:
    run = b.start(dataset_size=N, deterministic_order=deterministic)
    step(run, 0, [0, 1, 2, 3])
    run.checkpoint(0)
    step(run, 1, [4, 5, 6, 7])
    run.flush()
    again = b.start(resume_from=0, dataset_size=N, deterministic_order=deterministic)
    step(again, 1, [4, 5, 6, 7], content=content)
    again.finish()


def replay_differs(b: RunBuilder) -> None:
    _replayed(b, [8, 9, 10, 11], deterministic=True)


def replay_differs_nondeterministic(b: RunBuilder) -> None:
    _replayed(b, [8, 9, 10, 11], deterministic=False)


def replay_same(b: RunBuilder) -> None:
    _replayed(b, [4, 5, 6, 7], deterministic=True)


def missing_fingerprint(b: RunBuilder) -> None:
    run = start(b)
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1], FP[0:2], cell=0)
    run.fed(0, [3], FP[3:4], cell=1)
    run.finish()


def errored_cell_left_none(b: RunBuilder) -> None:
    """A cell that died after the exchange may never have flushed its fingerprints."""
    run = start(b)
    step(run, 0, [0, 1, 2, 3], cells={0: NORMAL, 1: ERRORED})
    run.finish()


def fed_unallocated(b: RunBuilder) -> None:
    run = start(b)
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1], FP[0:2], cell=0)
    run.fed(0, [2, 3, 9], [FP[2], FP[3], FP[9]], cell=1)
    run.finish()


PERM = [5, 2, 9, 0, 11, 3, 7, 1, 10, 4, 8, 6]


def shuffled(b: RunBuilder) -> None:
    run = start(b)
    run.order(0, 0, PERM, size=N, seed=1)
    step(run, 0, [0, 1, 2, 3], content=PERM[0:4])
    run.fed(1, [4, 5], [FP[i] for i in PERM[4:6]], cell=0, items=PERM[4:6])
    run.train(1, [4, 5])
    run.finish()


def shuffled_unmapped(b: RunBuilder) -> None:
    """The trainer feeds items in stream order although the declared order is shuffled."""
    run = start(b)
    run.order(0, 0, PERM, size=N, seed=1)
    step(run, 0, [0, 1, 2, 3])
    run.finish()


def claim_against_order(b: RunBuilder) -> None:
    run = start(b, manifest=False)
    run.order(0, 0, PERM, size=N, seed=1)
    run.train(0, [0, 1])
    run.fed(0, [0, 1], [FP[5], FP[2]], items=[5, 3])
    run.finish()


def order_changed_at_resume(b: RunBuilder) -> None:
    run = start(b, manifest=False)
    run.order(0, 0, PERM, size=N, seed=1)
    step(run, 0, [0, 1, 2, 3], content=PERM[0:4])
    run.checkpoint(0)
    run.flush()
    again = b.start(resume_from=0, dataset_size=N, deterministic_order=True)
    again.order(0, 0, PERM[::-1], size=N, seed=7)
    step(again, 1, [4, 5, 6, 7], content=PERM[::-1][4:8])
    again.finish()


def padded_epoch(b: RunBuilder) -> None:
    """A sampler that pads its epoch repeats an item: declared, so not a duplicate."""
    run = b.start(dataset_size=3, deterministic_order=True)
    run.order(0, 0, [2, 0, 1, 2], size=3)
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1], [FP[2], FP[0]], cell=0)
    run.fed(0, [2, 3], [FP[1], FP[2]], cell=1)
    run.finish()


def equal_items_in_dataset(b: RunBuilder) -> None:
    run = b.start(dataset_size=4, deterministic_order=True)
    run.declare(DatasetManifest.of([FP[0], FP[1], FP[1], FP[3]]))
    run.train(0, [0, 1, 2, 3])
    run.fed(0, [0, 1, 2, 3], [FP[0], FP[1], FP[1], FP[3]])
    run.finish()


def _loader(b: RunBuilder, *, seed: int, position: int) -> None:
    run = start(b, manifest=False)
    step(run, 0, [0, 1, 2, 3])
    run.loader(0, "saved", position, seed=1)
    run.checkpoint(0)
    run.flush()
    again = b.start(resume_from=0, dataset_size=N, deterministic_order=True)
    again.loader(0, "resumed", position, seed=seed)
    step(again, 1, [4, 5, 6, 7])
    again.finish()


def loader_restored(b: RunBuilder) -> None:
    _loader(b, seed=1, position=4)


def loader_seed_not_restored(b: RunBuilder) -> None:
    _loader(b, seed=2, position=4)


def loader_saved_too_early(b: RunBuilder) -> None:
    _loader(b, seed=1, position=0)


def manifest_not_kept(b: RunBuilder) -> None:
    run = b.start(dataset_size=N)
    run.declare(MANIFEST, copy=False)
    step(run, 0, [0, 1, 2, 3])
    run.finish()


def _case(name: str, build, *expect: Expect) -> Case:  # type: ignore[no-untyped-def]
    return Case(name, "FT008", build, tuple(expect), B=40, cells=2)


CASES: tuple[Case, ...] = (
    _case("clean", clean),
    _case("clean_without_manifest", clean_without_manifest),
    _case("no_fingerprints", no_fingerprints),
    _case(
        "peer_shard",
        peer_shard,
        Expect(samples=(2, 3), step=0, cell=1, text="should be item 2 but its content is item 0's"),
    ),
    _case(
        "peer_shard_without_manifest",
        peer_shard_without_manifest,
        Expect(
            samples=(0, 1, 2, 3),
            text="2 contents were each trained 2 times in epoch 0: position 0 (item 0)",
        ),
    ),
    _case(
        "overlapping_shards",
        overlapping_shards,
        Expect(samples=(2,), step=0, text="item 2 was trained 2 times in epoch 0 by cells 0, 1"),
    ),
    _case(
        "cells_disagree",
        cells_disagree,
        Expect(samples=(2,), step=0, cell=1, text="cells 0 and 1 fed different content"),
    ),
    _case("tensor_parallel_ranks", tensor_parallel_ranks),
    _case(
        "replay_differs",
        replay_differs,
        Expect(samples=(4, 5, 6, 7), step=1, text="one sample index, two data"),
    ),
    _case(
        "replay_differs_nondeterministic",
        replay_differs_nondeterministic,
        Expect(samples=(4, 5, 6, 7), step=1, severity="warning"),
    ),
    _case("replay_same", replay_same),
    _case(
        "missing_fingerprint",
        missing_fingerprint,
        Expect(samples=(2,), step=0, text="trained without a fingerprint"),
    ),
    _case("errored_cell_left_none", errored_cell_left_none),
    _case(
        "fed_unallocated",
        fed_unallocated,
        Expect(samples=(9,), step=0, text="not allocated"),
    ),
    _case("shuffled", shuffled),
    _case(
        "shuffled_unmapped",
        shuffled_unmapped,
        Expect(
            samples=(0, 1),
            cell=0,
            text="position 0 (epoch 0) should be item 5 but its content is item 0's",
        ),
        Expect(samples=(2, 3), cell=1, text="should be item 9"),
    ),
    _case(
        "claim_against_order",
        claim_against_order,
        Expect(samples=(1,), text="position 1 read item 3 instead of item 2"),
    ),
    _case(
        "order_changed_at_resume",
        order_changed_at_resume,
        Expect(
            text="incarnation 1 declared another order for epoch 0 than incarnation 0 "
            "(seed 7 instead of 1)"
        ),
    ),
    _case("padded_epoch", padded_epoch),
    _case("equal_items_in_dataset", equal_items_in_dataset),
    _case("loader_restored", loader_restored),
    _case(
        "loader_seed_not_restored",
        loader_seed_not_restored,
        Expect(step=0, text="seed 2 instead of 1"),
    ),
    _case(
        "loader_saved_too_early",
        loader_saved_too_early,
        Expect(step=0, text="reads next from stream position 0"),
    ),
    _case(
        "manifest_not_kept",
        manifest_not_kept,
        Expect(severity="warning", text="neither in the run's manifests/ folder"),
    ),
)
