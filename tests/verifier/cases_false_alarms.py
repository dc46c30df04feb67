"""Correct runs of shapes that once raised false alarms (issue 14), and their broken twins."""

from __future__ import annotations

from ftaudit.eventlog import CheckpointRef, ChecksumWhen
from tests.support.builder import DISCARDED, NORMAL, RunBuilder
from tests.verifier.cases import Case, Expect

B = 20  # keep = 14, B - keep = 6


def _warm(b: RunBuilder, steps: int = 5) -> object:
    """Steps 0..steps-1 of 4 samples each: the ring has wrapped once at step 5."""
    run = b.start()
    for step in range(steps):
        run.train(step, range(4 * step, 4 * step + 4))
    return run


def retried(attempts: int, *, clear: bool, samples: int = 4):
    def build(b: RunBuilder) -> None:
        run = _warm(b)
        first = 20
        for attempt in range(attempts - 1):
            run.train(
                5,
                range(first, first + samples),
                attempt=attempt,
                cells={0: NORMAL, 1: DISCARDED},
                clear_on_discard=clear,
            )
        run.train(5, range(first, first + samples), attempt=attempts - 1)
        run.train(6, range(first + samples, first + 2 * samples))
        run.finish()

    return build


CASES = (
    Case("a step retried thrice, discards cleared", "FT003", retried(4, clear=True), cells=2),
    Case("a step retried thrice, discards cleared", "FT004", retried(4, clear=True), cells=2),
    Case("a step retried six times, discards cleared", "FT003", retried(7, clear=True), cells=2),
    Case("a step retried six times, discards cleared", "FT004", retried(7, clear=True), cells=2),
    Case(
        "a retry on slots no clear reached",
        "FT003",
        retried(3, clear=False),
        (
            Expect(step=5, attempt=1, kind="over_budget", ids=(6, 7), samples=(22, 23)),
            Expect(step=5, attempt=2, kind="over_budget", ids=(8, 9, 10, 11)),
        ),
        cells=2,
    ),
)


# -- FT004 excusals ----------------------------------------------------------------------
def kl_loss(nonzero_zero_advantage: bool):
    """A loss with a KL term: a zero-advantage sample still gets gradient (declared)."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        ids = run.alloc(0, [10, 11, 12])
        run.advantage(0, ids, zero=[False, True, False], pure=False)
        run.snapshot(0, [0, 1, 2] if nonzero_zero_advantage else [0, 2])
        run.step_end(0)
        run.finish()

    return build


def no_tokens(*, nonzero: bool, empty: int = 1):
    """Samples fully masked (no loss tokens on any rank): excused, and counted."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        samples = list(range(10, 14))
        ids = run.alloc(0, samples)
        tokens = [0] * empty + [4] * (len(samples) - empty)
        run.advantage(0, ids, zero=[False] * len(samples), tokens=tokens, pure=True)
        trained = ids[empty:] + (ids[:empty] if nonzero else [])
        run.snapshot(0, sorted(trained))
        run.step_end(0)
        run.finish()

    return build


def zero_allocation_step(*, leak: bool):
    """Step 2 has no samples: no allocation; its snapshot is still checked."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        run.train(1, [3, 4, 5])
        rows = [0, 1, 2, 3, 4, 5] + ([9] if leak else [])
        run.snapshot(2, rows, stale=[])
        run.step_end(2)
        run.train(3, [6, 7, 8])
        run.finish()

    return build


def layout_change(*, drop_in_step: int | None = None, new_holds_old: bool = False):
    """Incarnation 1 resumes with another pipeline split: stage 0 keeps its witnesses (and
    their restored rows), stage 1's are new and start from zero rows."""

    def build(b: RunBuilder) -> None:
        old = ("pp0.head", "pp0.tail")
        run = b.start()
        for step in range(3):
            run.train(step, [2 * step, 2 * step + 1], instances=old)
            if step == 1:
                run.checkpoint(1)
        run.finish()
        run = b.start(resume_from=1)
        since: set[int] = set()
        for step in range(2, 5):
            ids = run.alloc(step, [2 * step, 2 * step + 1])
            stale = run.last_stale
            rows = run.weights[0]
            rows |= set(ids)
            since |= set(ids)
            for instance in old:
                run.snapshot(step, sorted(rows), instance=instance)
            for instance in ("pp1.head", "pp1.tail"):
                if step == drop_in_step and instance == "pp1.tail":
                    continue
                shown = rows if new_holds_old else since
                run.snapshot(step, sorted(shown), instance=instance)
            rows -= set(stale)
            since -= set(stale)
            run.step_end(step)
        run.finish()

    return build


CASES = (
    *CASES,
    Case("a KL loss: zero-advantage samples get gradient", "FT004", kl_loss(True)),
    Case(
        "a KL loss: a zero-advantage sample without gradient is missing",
        "FT004",
        kl_loss(False),
        (Expect(ids=(1,), samples=(11,), kind="missing"),),
    ),
    Case("a fully masked sample is excused", "FT004", no_tokens(nonzero=False)),
    Case(
        "a fully masked sample with a nonzero row is extra",
        "FT004",
        no_tokens(nonzero=True),
        (Expect(ids=(0,), samples=(10,), kind="extra", text="should leave no trace"),),
    ),
    Case(
        "a step mostly excused warns",
        "FT004",
        no_tokens(nonzero=False, empty=3),
        (Expect(step=0, kind="mostly_excused", severity="warning", text="3 of 4 samples"),),
    ),
    Case("a step allocating nothing is checked", "FT004", zero_allocation_step(leak=False)),
    Case(
        "a step allocating nothing still sees a leak",
        "FT004",
        zero_allocation_step(leak=True),
        (Expect(step=2, ids=(9,), kind="extra", text="never allocated"),),
    ),
    Case("a resume with another pipeline split", "FT004", layout_change()),
    Case(
        "a new instance holding rows from before it existed",
        "FT004",
        layout_change(new_holds_old=True),
        (
            Expect(step=2, instance="pp1.head", kind="extra"),
            Expect(step=2, instance="pp1.tail", kind="extra"),
            Expect(step=3, instance="pp1.head", kind="extra"),
            Expect(step=3, instance="pp1.tail", kind="extra"),
            Expect(step=4, instance="pp1.head", kind="extra"),
            Expect(step=4, instance="pp1.tail", kind="extra"),
        ),
    ),
    Case(
        "an instance of the new split missing in one step",
        "FT004",
        layout_change(drop_in_step=3),
        (Expect(step=3, instance="pp1.tail", kind="missing_instance"),),
    ),
)


def stale_not_cleared(b: RunBuilder) -> None:
    """The trainer neither zeroes nor declares stale ids: old committed rows linger."""
    run = b.start()
    rows: set[int] = set()
    for step in range(6):
        ids = run.alloc(step, range(4 * step, 4 * step + 4))
        rows |= set(ids)
        run.snapshot(step, sorted(rows), stale=[])  # never cleared
        run.step_end(step)
    run.finish()


CASES = (
    *CASES,
    Case(
        "uncleared stale rows are named as such, not as leaked work",
        "FT004",
        stale_not_cleared,
        (
            Expect(step=3, kind="extra", text="should have been zeroed as stale"),
            Expect(step=4, kind="extra", text="should have been zeroed as stale"),
            Expect(step=5, kind="extra", text="should have been zeroed as stale"),
        ),
    ),
)


# -- FT006 replica-local state and restores across a layout change ----------------------
LOCAL = ("buffer/bn.running_mean",)


def replica_local(*, corrupt_load: bool):
    """Batch-norm statistics differ per cell by design; declared, they are not compared
    across cells, but a load must still restore them exactly."""

    def build(b: RunBuilder) -> None:
        run = b.start()
        run.train(0, [0, 1, 2])
        for cell in range(2):
            state = {"param/w": "w0", LOCAL[0]: f"mean{cell}"}
            run.checksum(0, cell, state, replica_local=LOCAL)
            ref = CheckpointRef(iteration=0, incarnation=0)
            run.checksum(
                0, cell, state, when=ChecksumWhen.AT_SAVE, checkpoint=ref, replica_local=LOCAL
            )
        run.checkpoint(0)
        run.finish()
        again = b.start(resume_from=0)
        for cell in range(2):
            mean = "stale" if corrupt_load and cell == 1 else f"mean{cell}"
            again.checksum(
                1,
                cell,
                {"param/w": "w0", LOCAL[0]: mean},
                when=ChecksumWhen.AFTER_LOAD,
                replica_local=LOCAL,
            )
        again.train(1, [3, 4, 5])
        again.finish()

    return build


def resharded_restore(*, corrupt: bool):
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


def _saved_by_fsdp(b: RunBuilder, per_rank: dict[str, str] | None = None) -> RunBuilder:
    """Incarnation 0: one cell sharded over 2 ranks saves checkpoint 0 (each rank its rows
    and the whole-tensor digests), then incarnation 1 resumes from it."""
    run = b.start()
    run.train(0, [0, 1, 2])
    ref = CheckpointRef(iteration=0, incarnation=0)
    for rank, rows in HALVES:
        saved = {f"param/w@rows{rows}": f"shard{rank}", "param/w@whole": "W"}
        saved.update({name: f"{value}{rank}" for name, value in (per_rank or {}).items()})
        run.checksum(0, 0, saved, rank=rank, when=AT_SAVE, checkpoint=ref)
    run.checkpoint(0)
    run.finish()
    return b.start(resume_from=0)


def sharded_to_replicas(*, stale_cell: int | None = None):
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


def replicas_to_sharded(*, stale_rank: int | None = None):
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


def per_rank_state_shrink(*, swapped: bool):
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


CASES = (
    *CASES,
    Case("FSDP saved, DDP resumed", "FT006", sharded_to_replicas(), cells=2),
    Case(
        "FSDP saved, DDP resumed, one replica stale",
        "FT006",
        sharded_to_replicas(stale_cell=1),
        (
            Expect(cell=1, kind="restore_mismatch", text="param/w@whole"),
            Expect(cell=1, kind="replica_mismatch", text="param/w@whole"),
        ),
        cells=2,
    ),
    Case("DDP saved, FSDP resumed over more ranks", "FT006", replicas_to_sharded()),
    Case(
        "DDP saved, FSDP resumed, one rank's rows stale",
        "FT006",
        replicas_to_sharded(stale_rank=1),
        (Expect(cell=0, kind="restore_mismatch", text="2 rank(s), saved by 1"),),
    ),
    Case("a world-size shrink with per-rank state", "FT006", per_rank_state_shrink(swapped=False)),
    Case(
        "a world-size shrink restoring another rank's state",
        "FT006",
        per_rank_state_shrink(swapped=True),
        (Expect(cell=0, kind="restore_mismatch", text="stateful/rng"),),
    ),
    Case(
        "a resharded restore without whole-tensor digests",
        "FT006",
        shards_only,
        (Expect(cell=0, kind="restore_mismatch", text="no hash that both layouts log [w]"),),
    ),
    Case(
        "replica-local tensors differ across cells",
        "FT006",
        replica_local(corrupt_load=False),
        cells=2,
    ),
    Case(
        "a replica-local tensor loaded wrong",
        "FT006",
        replica_local(corrupt_load=True),
        (Expect(cell=1, kind="restore_mismatch", text="running_mean"),),
        cells=2,
    ),
    Case("a restore over another pipeline split", "FT006", resharded_restore(corrupt=False)),
    Case(
        "a restore over another pipeline split, one tensor wrong",
        "FT006",
        resharded_restore(corrupt=True),
        (Expect(cell=0, kind="restore_mismatch", text="another parallel layout"),),
    ),
)


# -- FT005: one root cause, one headline -------------------------------------------------
def loader_restart(offset: int):
    """Resumed from checkpoint 3 with the loader at stream position ``offset``."""

    def build(b: RunBuilder) -> None:
        run = b.start(deterministic_order=True)
        for step in range(6):
            run.train(step, range(4 * step, 4 * step + 4))
            if step == 3:
                run.checkpoint(3)
        run.log.close()
        again = b.start(resume_from=3, deterministic_order=True)
        for k, step in enumerate(range(4, 8)):
            again.train(step, range(offset + 4 * k, offset + 4 * k + 4))
        again.finish()

    return build


CASES = (
    *CASES,
    Case(
        "a loader restarting at 0 after a resume is one finding",
        "FT005",
        loader_restart(0),
        (
            Expect(
                step=4,
                kind="resumed_stream_replays",
                text="starts at sample 0, not at 16",
                samples=tuple(range(16)),
            ),
        ),
        B=40,
    ),
    Case(
        "a loader resuming one group late is one finding",
        "FT005",
        loader_restart(18),
        (Expect(step=4, kind="resumed_stream_skips", text="skips samples [16..17]"),),
        B=40,
    ),
)
