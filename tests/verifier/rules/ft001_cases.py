"""FT001 log-integrity: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from ftaudit.eventlog import CheckpointRef, RunLog
from tests.support.builder import OPTIONS, RunBuilder
from tests.verifier.rules.case import Case, Expect
from tests.verifier.rules.recipes import three_steps

RULE = "FT001"


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


CASES: tuple[Case, ...] = (
    Case("a clean run", three_steps),
    Case(
        "a gap in a writer's sequence (a deleted segment)",
        deleted_segment,
        (Expect(text="hole in writer trainer"),),
    ),
    Case(
        "a temp file left by a crashed flush",
        torn_temp_file,
        (Expect(severity="warning", text="truncated tail"),),
    ),
    Case(
        "a writer whose last durable events are missing",
        tail_lost_after_checkpoint,
        (Expect(text="truncated tail: writer trainer"),),
    ),
    Case(
        "resuming from a checkpoint never recorded as saved",
        resume_unsaved,
        (Expect(text="never recorded that checkpoint"),),
    ),
)
