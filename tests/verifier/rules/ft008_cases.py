"""FT008 data-identity: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from ftaudit.dataset import DatasetManifest
from tests.support.builder import ERRORED, NORMAL, RunBuilder
from tests.support.data_identity import FP, MANIFEST, N, start, step
from tests.verifier.rules.case import Case, Expect

RULE = "FT008"

# every case: two cells split each step's samples (``step``), on a ring of 40
case = partial(Case, B=40, cells=2)


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


def _replayed(b: RunBuilder, content: list[int], *, deterministic: bool | None) -> None:
    run = b.start(dataset_size=N, deterministic_order=deterministic)
    step(run, 0, [0, 1, 2, 3])
    run.checkpoint(0)
    step(run, 1, [4, 5, 6, 7])
    run.flush()
    again = b.start(resume_from=0, dataset_size=N, deterministic_order=deterministic)
    step(again, 1, [4, 5, 6, 7], content=content)
    again.finish()


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


def order_changed_at_resume(b: RunBuilder, deterministic: bool | None = True) -> None:
    run = b.start(dataset_size=N, deterministic_order=deterministic)
    run.order(0, 0, PERM, size=N, seed=1)
    step(run, 0, [0, 1, 2, 3], content=PERM[0:4])
    run.checkpoint(0)
    run.flush()
    again = b.start(resume_from=0, dataset_size=N, deterministic_order=deterministic)
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


def manifest_not_kept(b: RunBuilder) -> None:
    run = b.start(dataset_size=N)
    run.declare(MANIFEST, copy=False)
    step(run, 0, [0, 1, 2, 3])
    run.finish()


CASES: tuple[Case, ...] = (
    case("clean", clean),
    case("clean_without_manifest", clean_without_manifest),
    case("no_fingerprints", no_fingerprints),
    case(
        "peer_shard",
        peer_shard,
        (
            Expect(
                samples=(2, 3), step=0, cell=1, text="should be item 2 but its content is item 0's"
            ),
        ),
    ),
    case(
        "peer_shard_without_manifest",
        peer_shard_without_manifest,
        (
            Expect(
                samples=(0, 1, 2, 3),
                text="2 contents were each trained 2 times in epoch 0: position 0 (item 0)",
            ),
        ),
    ),
    case(
        "overlapping_shards",
        overlapping_shards,
        (Expect(samples=(2,), step=0, text="item 2 was trained 2 times in epoch 0 by cells 0, 1"),),
    ),
    case(
        "cells_disagree",
        cells_disagree,
        (Expect(samples=(2,), step=0, cell=1, text="cells 0 and 1 fed different content"),),
    ),
    case("tensor_parallel_ranks", tensor_parallel_ranks),
    case(
        "replay_differs",
        partial(_replayed, content=[8, 9, 10, 11], deterministic=True),
        (Expect(samples=(4, 5, 6, 7), step=1, text="one sample index, two data"),),
    ),
    case(
        "replay_differs_nondeterministic",
        partial(_replayed, content=[8, 9, 10, 11], deterministic=False),
        (Expect(samples=(4, 5, 6, 7), step=1, severity="warning"),),
    ),
    # undeclared (None) reads as declared non-deterministic (False), in FT005 too
    case(
        "replay_differs_undeclared",
        partial(_replayed, content=[8, 9, 10, 11], deterministic=None),
        (Expect(samples=(4, 5, 6, 7), step=1, severity="warning"),),
    ),
    case("replay_same", partial(_replayed, content=[4, 5, 6, 7], deterministic=True)),
    case("replay_same_undeclared", partial(_replayed, content=[4, 5, 6, 7], deterministic=None)),
    case(
        "missing_fingerprint",
        missing_fingerprint,
        (Expect(samples=(2,), step=0, text="trained without a fingerprint"),),
    ),
    case("errored_cell_left_none", errored_cell_left_none),
    case(
        "fed_unallocated",
        fed_unallocated,
        (Expect(samples=(9,), step=0, text="not allocated"),),
    ),
    case("shuffled", shuffled),
    case(
        "shuffled_unmapped",
        shuffled_unmapped,
        (
            Expect(
                samples=(0, 1),
                cell=0,
                text="position 0 (epoch 0) should be item 5 but its content is item 0's",
            ),
            Expect(samples=(2, 3), cell=1, text="should be item 9"),
        ),
    ),
    case(
        "claim_against_order",
        claim_against_order,
        (Expect(samples=(1,), text="position 1 read item 3 instead of item 2"),),
    ),
    case(
        "order_changed_at_resume",
        order_changed_at_resume,
        (
            Expect(
                text="incarnation 1 declared another order for epoch 0 than incarnation 0 "
                "(seed 7 instead of 1)"
            ),
        ),
    ),
    *(
        case(
            f"order_changed_at_resume_{name}",
            partial(order_changed_at_resume, deterministic=declared),
            (Expect(severity="warning", text="declared another order for epoch 0"),),
        )
        for name, declared in (("nondeterministic", False), ("undeclared", None))
    ),
    case("padded_epoch", padded_epoch),
    case("equal_items_in_dataset", equal_items_in_dataset),
    case("loader_restored", partial(_loader, seed=1, position=4)),
    case(
        "loader_seed_not_restored",
        partial(_loader, seed=2, position=4),
        (Expect(step=0, text="seed 2 instead of 1"),),
    ),
    case(
        "loader_saved_too_early",
        partial(_loader, seed=1, position=0),
        (Expect(step=0, text="reads next from stream position 0"),),
    ),
    case(
        "manifest_not_kept",
        manifest_not_kept,
        (Expect(severity="warning", text="neither in the run's manifests/ folder"),),
    ),
)
