"""Cases of FT001-FT003 and FT005-FT007 (issue 4 item 4), as data."""

from __future__ import annotations

from ftaudit.eventlog import CheckpointRef, ChecksumWhen, IntRuns, RunLog
from tests.support.builder import DISCARDED, NORMAL, OPTIONS, RunBuilder
from tests.verifier.cases import Case, Expect
from tests.verifier.cases_ft004 import restart_ok


def three_steps(b: RunBuilder) -> None:
    run = b.start()
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        run.flush()
    run.finish()


# -- FT001 ------------------------------------------------------------------------------
def deleted_segment(b: RunBuilder) -> None:
    three_steps(b)
    b.delete_segment("trainer", 1)


def torn_temp_file(b: RunBuilder) -> None:
    three_steps(b)
    folder = next(p for p in (b.root / "events").iterdir() if p.name.startswith("trainer"))
    (folder / ".000000000099.parquet.4242.tmp").write_bytes(b"PAR1 half a flush")


def tail_lost_after_checkpoint(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.flush()
    run.train(1, [3, 4, 5])
    run.checkpoint(1)  # records the trainer's last durable seq
    run.finish()
    b.delete_segment("trainer", -1)


def resume_unsaved(b: RunBuilder) -> None:
    three_steps(b)
    log = RunLog.start(
        b.root,
        buffer_size=b.B,
        resume_from=CheckpointRef(iteration=1, incarnation=0),
        options=OPTIONS,
    )
    log.finish()


# -- FT002 ------------------------------------------------------------------------------
def committed_twice(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.step_end(0)
    run.train(1, [3, 4, 5])
    run.finish()


def step_skipped(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.train(2, [3, 4, 5])
    run.finish()


def resumed_at_wrong_step(b: RunBuilder) -> None:
    run = b.start()
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        if step == 1:
            run.checkpoint(1)
    run.log.close()
    log = RunLog.start(
        b.root,
        buffer_size=b.B,
        resume_from=CheckpointRef(iteration=1, incarnation=0),
        options=OPTIONS,
    )
    b.open.append(type(run)(b, log, run.allocator))
    b.open[-1].step_end(3)
    log.finish()


def accepted_discarded(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.step_end(0, {0: NORMAL, 1: DISCARDED})
    run.finish()


# -- FT003 ------------------------------------------------------------------------------
def reissued_ids(b: RunBuilder) -> None:
    run = b.start()
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        if step == 1:
            run.checkpoint(1)
    run.log.close()
    again = b.start(resume_from=1, resume_counter=6)  # should be 9
    again.train(2, [6, 7, 8])
    again.finish()


def wrong_ids(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], witness_ids=IntRuns.arc(5, 3, b.B))
    run.finish()


def wrong_stale(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2], stale_ids=IntRuns())
    run.finish()


def wrong_counter(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, [0, 1, 2])
    run.alloc(1, [3, 4, 5], counter_after=7)
    run.finish()


def too_many_per_step(b: RunBuilder) -> None:
    run = b.start()
    run.alloc(0, list(range(7)))  # B = 20: B - keep = 6
    run.finish()


# -- FT005 ------------------------------------------------------------------------------
def sample_twice(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2, 3])
    run.train(1, [3, 4, 5])
    run.finish()


def sample_skipped(b: RunBuilder) -> None:
    run = b.start(deterministic_order=True)
    run.train(0, [0, 1, 2])
    run.train(1, [4, 5, 6])
    run.finish()


def _replay(b: RunBuilder, order: bool | None) -> None:
    run = b.start(deterministic_order=order)
    for step in range(3):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        if step == 0:
            run.checkpoint(0)
    run.log.close()
    again = b.start(resume_from=0, deterministic_order=order)
    again.train(1, [3, 4, 5])
    again.train(2, [9, 10, 11])
    again.finish()


def replay_differs(b: RunBuilder) -> None:
    _replay(b, True)


def replay_differs_nondeterministic(b: RunBuilder) -> None:
    _replay(b, False)


# -- FT006 ------------------------------------------------------------------------------
def _replicas(b: RunBuilder, cell1: dict[str, str]) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.checksum(0, 0, {"w": "a0", "exp_avg": "m0"}, rank=0)
    run.checksum(0, 0, {"w": "b0", "exp_avg": "n0"}, rank=1)  # another shard: not compared
    run.checksum(0, 1, cell1, rank=0)
    run.checksum(0, 1, {"w": "b0", "exp_avg": "n0"}, rank=1)
    run.finish()


def replicas_equal(b: RunBuilder) -> None:
    _replicas(b, {"w": "a0", "exp_avg": "m0"})


def replica_differs(b: RunBuilder) -> None:
    _replicas(b, {"w": "a1", "exp_avg": "m0"})


def replica_extra_tensor(b: RunBuilder) -> None:
    _replicas(b, {"w": "a0", "exp_avg": "m0", "bias": "z"})


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


def resharded_restore_equal(b: RunBuilder) -> None:
    _resharded_restore(b, "whole")


def resharded_restore_differs(b: RunBuilder) -> None:
    _resharded_restore(b, "other")


def heal_differs(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2])
    run.checksum(0, 0, {"w": "a0"})
    run.checksum(0, 1, {"w": "a0"})
    run.checksum(1, 1, {"w": "stale"}, when=ChecksumWhen.AFTER_HEAL, source_cell=0)
    run.train(1, [3, 4, 5])
    run.finish()


# -- FT007 ------------------------------------------------------------------------------
def engines_equal(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a"}, 1: {"w": "a"}})
    run.engines(0, {0: {"w": "b"}, 1: {"w": "b"}, 2: {"w": "b"}})
    run.finish()


def engine_differs(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a"}, 1: {"w": "a"}})
    run.engines(0, {0: {"w": "b"}, 1: {"w": "b"}, 2: {"w": "c"}})
    run.finish()


def engine_tensor_missing(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a", "v": "x"}, 1: {"w": "a"}})
    run.finish()


CASES = (
    Case("a clean run", "FT001", three_steps),
    Case(
        "a gap in a writer's sequence (a deleted segment)",
        "FT001",
        deleted_segment,
        (Expect(text="hole in writer trainer"),),
    ),
    Case(
        "a temp file left by a crashed flush",
        "FT001",
        torn_temp_file,
        (Expect(severity="warning", text="truncated tail"),),
    ),
    Case(
        "a writer whose last durable events are missing",
        "FT001",
        tail_lost_after_checkpoint,
        (Expect(text="truncated tail: writer trainer"),),
    ),
    Case(
        "resuming from a checkpoint never recorded as saved",
        "FT001",
        resume_unsaved,
        (Expect(text="never recorded that checkpoint"),),
    ),
    Case("steps 0..2 committed once each", "FT002", three_steps),
    Case("a step committed twice", "FT002", committed_twice, (Expect(step=0, text="2 times"),)),
    Case("a step skipped", "FT002", step_skipped, (Expect(step=1, text="never committed"),)),
    Case(
        "a resume that starts after its checkpoint's next step",
        "FT002",
        resumed_at_wrong_step,
        (Expect(step=3, text="began at step 3, not 2"), Expect(step=2, text="never committed")),
    ),
    Case(
        "an accepted attempt that a cell discarded",
        "FT002",
        accepted_discarded,
        (Expect(step=0, cell=1, text="discarded"),),
        cells=2,
    ),
    Case("a restart continues the counter", "FT003", restart_ok),
    Case(
        "a resumed incarnation re-issuing abandoned ids",
        "FT003",
        reissued_ids,
        (Expect(ids=(6, 7, 8), samples=(6, 7, 8), text="re-issues"),),
    ),
    Case("ids differing from the replay", "FT003", wrong_ids, (Expect(text="its ids are"),)),
    Case(
        "stale ids differing from the replay",
        "FT003",
        wrong_stale,
        (Expect(text="its stale ids are"),),
    ),
    Case(
        "counter_after differing from the replay",
        "FT003",
        wrong_counter,
        (Expect(step=1, text="counter_after is 7, the replay gives 6"),),
    ),
    Case(
        "a step allocating more than B - keep",
        "FT003",
        too_many_per_step,
        (Expect(step=0, text="within B - keep = 6 ids"),),
    ),
    Case("a restart trains each sample once", "FT005", restart_ok),
    Case(
        "a sample index trained in two committed steps",
        "FT005",
        sample_twice,
        (Expect(samples=(3,), text="steps 0, 1"),),
    ),
    Case(
        "a skipped sample in a deterministic order",
        "FT005",
        sample_skipped,
        (Expect(samples=(3,), text="never trained"),),
    ),
    Case(
        "a replayed step training other samples",
        "FT005",
        replay_differs,
        (
            Expect(step=2, samples=(9, 10, 11, 6, 7, 8), text="replayed"),
            Expect(samples=(6, 7, 8), kind="skipped_sample", text="declares a deterministic"),
        ),
    ),
    Case(
        "a replayed step training other samples, order declared non-deterministic",
        "FT005",
        replay_differs_nondeterministic,
        (
            Expect(step=2, severity="warning", text="does not declare a deterministic"),
            Expect(samples=(6, 7, 8), severity="warning", kind="skipped_sample"),
        ),
    ),
    Case("replicas agree (ranks within a cell differ)", "FT006", replicas_equal, cells=2),
    Case(
        "the same rank in two cells with different hashes",
        "FT006",
        replica_differs,
        (Expect(step=0, cell=1, text="1 tensor(s) hash differently [w]"),),
        cells=2,
    ),
    Case(
        "a tensor present on one side only",
        "FT006",
        replica_extra_tensor,
        (Expect(cell=1, text="only in this cell [bias]"),),
        cells=2,
    ),
    Case(
        "a restore that loaded other weights than were saved",
        "FT006",
        restore_differs,
        (Expect(cell=0, text="loaded checkpoint 0"),),
    ),
    Case(
        "a restore across a resharding: shards of other rows are not compared, digests are",
        "FT006",
        resharded_restore_equal,
    ),
    Case(
        "a resharded restore whose whole-tensor digest differs",
        "FT006",
        resharded_restore_differs,
        (Expect(cell=0, text="1 tensor(s) hash differently [w@whole]"),),
    ),
    Case(
        "a healed cell that differs from its source",
        "FT006",
        heal_differs,
        (Expect(step=1, cell=1, text="healed from cell 0"),),
        cells=2,
    ),
    Case("engines agree", "FT007", engines_equal),
    Case(
        "an engine differing from engine 0",
        "FT007",
        engine_differs,
        (Expect(step=0, text="engine 2 differs"),),
    ),
    Case(
        "a tensor present on one engine only",
        "FT007",
        engine_tensor_missing,
        (Expect(text="missing on engine 1 [v]"),),
    ),
)
