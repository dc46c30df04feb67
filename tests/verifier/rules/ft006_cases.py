"""FT006 checksums: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from ftaudit.eventlog import CheckpointRef, ChecksumWhen
from ftaudit.eventlog.events import SHARD_TAG, WHOLE_TAG
from tests.support.builder import Incarnation, RunBuilder
from tests.verifier.rules.case import Build, Case, Expect

RULE = "FT006"


def _replicas(b: RunBuilder, cell1: dict[str, str]) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.checksum(0, 0, {"w": "a0", "exp_avg": "m0"}, rank=0)
    run.checksum(0, 0, {"w": "b0", "exp_avg": "n0"}, rank=1)  # another shard: not compared
    run.checksum(0, 1, cell1, rank=0)
    run.checksum(0, 1, {"w": "b0", "exp_avg": "n0"}, rank=1)
    run.finish()


def _reference_logged_twice(b: RunBuilder, cell1: dict[str, str]) -> None:
    """Cell 0's rank logs two checksums at one point: cell 1 is compared with the first."""
    run = b.start()
    run.train(0, [0, 1, 2])
    run.checksum(0, 0, {"w": "a0"})
    run.checksum(0, 0, {"w": "a9"})
    run.checksum(0, 1, cell1)
    run.finish()


def restore_differs(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    ref = CheckpointRef(iteration=0, incarnation=0)
    run.checksum(0, 0, {"w": "a0"}, when=ChecksumWhen.AT_SAVE, checkpoint=ref)
    run.checkpoint(0)
    run.log.close()
    again = b.start(resume_from=0)
    again.checksum(0, 0, {"w": "XX"}, when=ChecksumWhen.AFTER_LOAD, checkpoint=ref)
    again.train(1, [3, 4, 5])
    again.finish()


def _resharded_restore(b: RunBuilder, whole_after_load: str) -> None:
    """Saved by 2 FSDP ranks (local shards + whole digest), loaded on 1: the shards'
    names differ (another layout) and only the whole-tensor digest compares."""
    run = b.start()
    run.train(0, [0, 1, 2])
    ref = CheckpointRef(iteration=0, incarnation=0)
    for rank, rows in ((0, "[0:4]"), (1, "[4:8]")):
        hashes = {"w@whole": "whole", f"w@rows{rows}": f"shard{rank}"}
        run.checksum(0, 0, hashes, rank=rank, when=ChecksumWhen.AT_SAVE, checkpoint=ref)
    run.checkpoint(0)
    run.log.close()
    again = b.start(resume_from=0)
    loaded = {"w@whole": whole_after_load, "w@rows[0:8]": "all rows"}
    again.checksum(0, 0, loaded, when=ChecksumWhen.AFTER_LOAD, checkpoint=ref)
    again.train(1, [3, 4, 5])
    again.finish()


def heal_differs(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.checksum(0, 0, {"w": "a0"})
    run.checksum(0, 1, {"w": "a0"})
    run.checksum(1, 1, {"w": "stale"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    run.train(1, [3, 4, 5])
    run.finish()


def heal_after_the_step(*, received: str, sender_logs: bool = False) -> Build:
    """Cell 1 is healed from cell 0 at the start of step 1 and trains it; cell 2 dies in
    step 1 and is healed from cell 1 after it (at step 1, training step 2 next). Cell 1
    sent its state after step 1 (``w1``), not what it received at the start (``w0``),
    whether or not it logs what it sent."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        for cell in range(3):
            run.checksum(0, cell, {"w": "w0"})
        run.checksum(1, 1, {"w": "w0"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
        for cell in (0, 1):
            run.checksum(1, cell, {"w": "w1"})
        if sender_logs:
            run.checksum(1, 1, {"w": "w1"}, when=ChecksumWhen.AFTER_HEAL)
        run.checksum(1, 2, {"w": received}, when=ChecksumWhen.AFTER_HEAL, source_cell=1)
        for cell in range(3):
            run.checksum(2, cell, {"w": "w2"})
        run.finish()

    return build


def heal_chain(b: RunBuilder) -> None:
    """At the start of step 1 cell 1 is healed from cell 0 and cell 2 from cell 1: cell 1
    sends what it received (nobody logs what they sent)."""
    run = b.start()
    run.checksum(0, 0, {"w": "w0"})
    run.checksum(1, 1, {"w": "w0"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    run.checksum(1, 2, {"w": "w0"}, when=ChecksumWhen.AFTER_HEAL, source_cell=1)
    for cell in range(3):
        run.checksum(1, cell, {"w": "w1"})
    run.finish()


def source_healed_later(*, received: str) -> Build:
    """Cell 2 is healed from cell 1 at the start of step 1; cell 1 then dies in step 1 and
    is itself healed from cell 0 after it: cell 2 got cell 1's state before step 1."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        for cell in range(2):
            run.checksum(0, cell, {"w": "w0"})
        run.checksum(1, 2, {"w": received}, when=ChecksumWhen.AFTER_HEAL, source_cell=1)
        for cell in (0, 2):
            run.checksum(1, cell, {"w": "w1"})
        run.checksum(1, 1, {"w": "w1"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
        for cell in range(3):
            run.checksum(2, cell, {"w": "w2"})
        run.finish()

    return build


LOCAL = ("buffer/bn.running_mean",)


def replica_local(*, corrupt_load: bool) -> Build:
    """Batch-norm statistics differ per cell by design; declared, they are not compared
    across cells (nor their shards and whole-tensor digests, declared by the tensor's
    name), but a load must still restore them exactly."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        for cell in range(2):
            state = {"param/w": "w0", LOCAL[0]: f"mean{cell}"}
            run.checksum(0, cell, state, replica_local=LOCAL)
            ref = CheckpointRef(iteration=0, incarnation=0)
            saved = {
                **state,
                f"{LOCAL[0]}{WHOLE_TAG}": f"whole{cell}",
                f"{LOCAL[0]}{SHARD_TAG}[0:4]": f"rows{cell}",
            }
            run.checksum(
                0, cell, saved, when=ChecksumWhen.AT_SAVE, checkpoint=ref, replica_local=LOCAL
            )
        run.checkpoint(0)
        run.finish()
        again = b.start(resume_from=0)
        for cell in range(2):
            mean = "stale" if corrupt_load and cell == 1 else f"mean{cell}"
            loaded = {
                "param/w": "w0",
                LOCAL[0]: mean,
                f"{LOCAL[0]}{WHOLE_TAG}": f"whole{cell}",
                f"{LOCAL[0]}{SHARD_TAG}[0:4]": f"rows{cell}",
            }
            again.checksum(
                1,
                cell,
                loaded,
                when=ChecksumWhen.AFTER_LOAD,
                replica_local=LOCAL,
            )
        again.train(1, [3, 4, 5])
        again.finish()

    return build


def resharded_restore(*, corrupt: bool) -> Build:
    """Saved by one rank per cell, loaded over two (another pipeline split)."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        ref = CheckpointRef(iteration=0, incarnation=0)
        saved = {"param/a": "a0", "param/b": "b0", "optim/a/exp_avg": "m0"}
        run.checksum(0, 0, saved, when=ChecksumWhen.AT_SAVE, checkpoint=ref)
        run.checkpoint(0)
        run.finish()
        again = b.start(resume_from=0)
        stage0 = {"param/a": "a0", "optim/a/exp_avg": "m0"}
        stage1 = {"param/b": "bX" if corrupt else "b0"}
        again.checksum(1, 0, stage0, rank=0, when=ChecksumWhen.AFTER_LOAD)
        again.checksum(1, 0, stage1, rank=1, when=ChecksumWhen.AFTER_LOAD)
        again.train(1, [3, 4, 5])
        again.finish()

    return build


AT_SAVE, AFTER_LOAD = ChecksumWhen.AT_SAVE, ChecksumWhen.AFTER_LOAD
HALVES = ((0, "[0:4]"), (1, "[4:8]"))
"""Two FSDP ranks' rows of an 8-row tensor."""


def _saved_by_fsdp(
    b: RunBuilder, per_rank: dict[str, str] | None = None, shared: dict[str, str] | None = None
) -> Incarnation:
    """Incarnation 0: one cell sharded over 2 ranks saves checkpoint 0 (each rank its rows
    and the whole-tensor digests; ``per_rank`` values suffixed with the rank, ``shared``
    ones as they are), then incarnation 1 resumes from it."""
    run = b.start()
    run.train(0, [0, 1, 2])
    ref = CheckpointRef(iteration=0, incarnation=0)
    for rank, rows in HALVES:
        saved = {f"param/w@rows{rows}": f"shard{rank}", "param/w@whole": "W", **(shared or {})}
        saved.update({name: f"{value}{rank}" for name, value in (per_rank or {}).items()})
        run.checksum(0, 0, saved, rank=rank, when=AT_SAVE, checkpoint=ref)
    run.checkpoint(0)
    run.finish()
    return b.start(resume_from=0)


def sharded_to_replicas(*, stale_cell: int | None = None) -> Build:
    """FSDP saved, DDP resumed with 2 cells: a local shard and a plain hash never meet;
    the whole-tensor digests compare (each cell against the one cell that saved)."""

    def build(b: RunBuilder) -> None:
        again = _saved_by_fsdp(b)
        for cell in range(2):
            whole = "stale" if cell == stale_cell else "W"
            loaded = {"param/w": "all bytes", "param/w@whole": whole}
            again.checksum(1, cell, loaded, when=AFTER_LOAD)
        again.train(1, [3, 4, 5])
        again.finish()

    return build


def replicas_to_sharded(*, stale_rank: int | None = None) -> Build:
    """DDP saved by one process, FSDP resumed over 2 ranks: rank 1 saved nothing, its
    rows are covered by the whole-tensor digest both ranks log."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        ref = CheckpointRef(iteration=0, incarnation=0)
        saved = {"param/w": "all bytes", "param/w@whole": "W"}
        run.checksum(0, 0, saved, when=AT_SAVE, checkpoint=ref)
        run.checkpoint(0)
        run.finish()
        again = b.start(resume_from=0)
        for rank, rows in HALVES:
            whole = "stale" if rank == stale_rank else "W"
            loaded = {f"param/w@rows{rows}": f"shard{rank}", "param/w@whole": whole}
            again.checksum(1, 0, loaded, rank=rank, when=AFTER_LOAD)
        again.train(1, [3, 4, 5])
        again.finish()

    return build


def per_rank_state_shrink(*, swapped: bool) -> Build:
    """2 FSDP ranks with a per-rank RNG state resume on one: rank 0 restores its own RNG
    state (rank 1's has no place in the new layout); restoring rank 1's is a defect."""

    def build(b: RunBuilder) -> None:
        again = _saved_by_fsdp(b, {"stateful/rng": "rng"})
        loaded = {
            "param/w@rows[0:8]": "all rows",
            "param/w@whole": "W",
            "stateful/rng": "rng1" if swapped else "rng0",
        }
        again.checksum(1, 0, loaded, when=AFTER_LOAD)
        again.train(1, [3, 4, 5])
        again.finish()

    return build


QUARTERS = ((0, "[0:2]"), (1, "[2:4]"), (2, "[4:6]"), (3, "[6:8]"))
"""Four FSDP ranks' rows of the same 8-row tensor."""


def per_rank_state_grow(*, per_rank: str, taken_from: int | None = 0) -> Build:
    """2 FSDP ranks resume on 4 (the world grew): ranks 2 and 3 saved nothing. ``per_rank``
    is ``"differ"`` (each saved rank its own ``stateful/rng``: the new ranks take rank
    ``taken_from``'s copy, or a fresh state with None) or ``"same"`` (an LR scheduler
    every saved rank held identically, which the new ranks restore: correct)."""

    def build(b: RunBuilder) -> None:
        if per_rank == "differ":
            name, again = "stateful/rng", _saved_by_fsdp(b, per_rank={"stateful/rng": "s"})
        else:
            name = "stateful/lr_scheduler"
            again = _saved_by_fsdp(b, shared={name: "s"})
        for rank, rows in QUARTERS:
            loaded = {f"param/w@rows{rows}": f"quarter{rank}", "param/w@whole": "W"}
            if per_rank == "same":
                loaded[name] = "s"
            elif rank < 2:
                loaded[name] = f"s{rank}"
            else:
                loaded[name] = "fresh" if taken_from is None else f"s{taken_from}"
            again.checksum(1, 0, loaded, rank=rank, when=AFTER_LOAD)
        again.train(1, [3, 4, 5])
        again.finish()

    return build


def per_rank_state_reordered(b: RunBuilder) -> None:
    """The same 2 ranks resume, but rank 0 loads rank 1's file and rank 1 rank 0's."""
    again = _saved_by_fsdp(b, {"stateful/rng": "s"})
    for rank, rows in HALVES:
        loaded = {f"param/w@rows{rows}": f"shard{rank}", "param/w@whole": "W"}
        loaded["stateful/rng"] = f"s{1 - rank}"
        again.checksum(1, 0, loaded, rank=rank, when=AFTER_LOAD)
    again.train(1, [3, 4, 5])
    again.finish()


def shards_only(b: RunBuilder) -> None:
    """Checksums without whole-tensor digests, over another layout: nothing compares."""
    run = b.start()
    run.train(0, [0, 1, 2])
    ref = CheckpointRef(iteration=0, incarnation=0)
    for rank, rows in HALVES:
        run.checksum(0, 0, {f"w@rows{rows}": "x"}, rank=rank, when=AT_SAVE, checkpoint=ref)
    run.checkpoint(0)
    run.finish()
    again = b.start(resume_from=0)
    again.checksum(1, 0, {"w@rows[0:8]": "x"}, when=AFTER_LOAD)
    again.train(1, [3, 4, 5])
    again.finish()


CASES: tuple[Case, ...] = (
    Case(
        "replicas agree (ranks within a cell differ)",
        partial(_replicas, cell1={"w": "a0", "exp_avg": "m0"}),
        cells=2,
    ),
    Case(
        "replicas agree, their tensors listed in another order",
        partial(_replicas, cell1={"exp_avg": "m0", "w": "a0"}),
        cells=2,
    ),
    Case(
        "the same rank in two cells with different hashes",
        partial(_replicas, cell1={"w": "a1", "exp_avg": "m0"}),
        (Expect(step=0, cell=1, text="1 tensor(s) hash differently [w]"),),
        cells=2,
    ),
    Case(
        "the reference cell logs twice at one point: its first checksum is the reference",
        partial(_reference_logged_twice, cell1={"w": "a0"}),
        cells=2,
    ),
    Case(
        "the reference cell logs twice at one point: matching its second is a difference",
        partial(_reference_logged_twice, cell1={"w": "a9"}),
        (Expect(step=0, cell=1, text="1 tensor(s) hash differently [w]"),),
        cells=2,
    ),
    Case(
        "a tensor present on one side only",
        partial(_replicas, cell1={"w": "a0", "exp_avg": "m0", "bias": "z"}),
        (Expect(cell=1, text="only in this cell [bias]"),),
        cells=2,
    ),
    Case(
        "a restore that loaded other weights than were saved",
        restore_differs,
        (Expect(cell=0, text="loaded checkpoint 0"),),
    ),
    Case(
        "a restore across a resharding: shards of other rows are not compared, digests are",
        partial(_resharded_restore, whole_after_load="whole"),
    ),
    Case(
        "a resharded restore whose whole-tensor digest differs",
        partial(_resharded_restore, whole_after_load="other"),
        (Expect(cell=0, text="1 tensor(s) hash differently [w@whole]"),),
    ),
    Case(
        "a healed cell that differs from its source",
        heal_differs,
        (Expect(step=1, cell=1, text="healed from cell 0"),),
        cells=2,
    ),
    # a heal is compared with the source's state when it sent, wherever in the step the
    # heal falls and whether or not the source logs what it sent
    Case(
        "a heal after the step, from a source healed before it", heal_after_the_step(received="w1")
    ),
    Case(
        "a heal after the step, from a source healed before it, logging what it sent",
        heal_after_the_step(received="w1", sender_logs=True),
    ),
    *(
        Case(
            f"a heal after the step that received the source's state before it{how}",
            heal_after_the_step(received="w0", sender_logs=logs),
            (Expect(step=1, cell=2, kind="heal_mismatch", text="healed from cell 1"),),
        )
        for how, logs in (("", False), (", logged by the source", True))
    ),
    Case("a chain of heals at the start of a step", heal_chain),
    Case("a heal from a source healed later in the step", source_healed_later(received="w0")),
    Case(
        "a heal from a source healed later in the step, receiving the later state",
        source_healed_later(received="w1"),
        (Expect(step=1, cell=2, kind="heal_mismatch", text="healed from cell 1"),),
    ),
    Case("FSDP saved, DDP resumed", sharded_to_replicas(), cells=2),
    Case(
        "FSDP saved, DDP resumed, one replica stale",
        sharded_to_replicas(stale_cell=1),
        (
            Expect(cell=1, kind="restore_mismatch", text="param/w@whole"),
            Expect(cell=1, kind="replica_mismatch", text="param/w@whole"),
        ),
        cells=2,
    ),
    Case("DDP saved, FSDP resumed over more ranks", replicas_to_sharded()),
    Case(
        "DDP saved, FSDP resumed, one rank's rows stale",
        replicas_to_sharded(stale_rank=1),
        (Expect(cell=0, kind="restore_mismatch", text="2 rank(s), saved by 1"),),
    ),
    Case("a world-size shrink with per-rank state", per_rank_state_shrink(swapped=False)),
    Case(
        "a world-size shrink restoring another rank's state",
        per_rank_state_shrink(swapped=True),
        (Expect(cell=0, kind="restore_mismatch", text="stateful/rng"),),
    ),
    Case(
        "a world-size grow restoring state every saved rank held",
        per_rank_state_grow(per_rank="same"),
    ),
    Case(
        "a world-size grow restoring one saved rank's per-rank state on the new ranks",
        per_rank_state_grow(per_rank="differ"),
        tuple(
            Expect(
                cell=0,
                kind="foreign_copy",
                text=f"rank {r} of cell 0 in incarnation 1 loaded checkpoint 0 (saved by "
                "incarnation 0) without a saved copy of its own of [stateful/rng]: ranks 0, 1 "
                f"saved different copies (state of one rank), so none is rank {r}'s (it holds "
                "rank 0's copy of stateful/rng)",
            )
            for r in (2, 3)
        ),
    ),
    Case(
        "a world-size grow giving the new ranks fresh per-rank state",
        per_rank_state_grow(per_rank="differ", taken_from=None),
        tuple(
            Expect(cell=0, kind="foreign_copy", text="stateful/rng matches no copy") for _ in (2, 3)
        ),
    ),
    Case(
        "the same ranks restoring each other's per-rank state",
        per_rank_state_reordered,
        tuple(
            Expect(cell=0, kind="restore_mismatch", text="hash differently [stateful/rng]")
            for _ in (0, 1)
        ),
    ),
    Case(
        "a resharded restore without whole-tensor digests",
        shards_only,
        (Expect(cell=0, kind="restore_mismatch", text="no hash that both layouts log [w]"),),
    ),
    Case("replica-local tensors differ across cells", replica_local(corrupt_load=False), cells=2),
    Case(
        "a replica-local tensor loaded wrong",
        replica_local(corrupt_load=True),
        (Expect(cell=1, kind="restore_mismatch", text="running_mean"),),
        cells=2,
    ),
    Case("a restore over another pipeline split", resharded_restore(corrupt=False)),
    Case(
        "a restore over another pipeline split, one tensor wrong",
        resharded_restore(corrupt=True),
        (Expect(cell=0, kind="restore_mismatch", text="another parallel layout"),),
    ),
)
