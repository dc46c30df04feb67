"""A run that seals a segment every step, and what a compaction must leave unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions, step_context
from ftaudit.eventlog.reader import read_records
from tests.support.cli import Invoke


def write_small_segments(
    run_dir: Path,
    *,
    steps: int = 12,
    key: bytes | None = None,
    roll: int = 0,
    finish: bool = True,
) -> Path:
    """A trainer and a driver flushing after every step, a checkpoint every third step;
    writers roll every ``roll`` segments (0: never). ``finish=False`` leaves the run as a
    job killed after its last flush does: no ``run_finished``, no clean close (which would
    roll the writers' tails and remove their originals), the writers left open."""
    options = WriterOptions(fsync=False, mac_key=key, roll_segments=roll)
    run = RunLog.start(run_dir, buffer_size=8, options=options)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in range(steps):
        with step_context(step, 0):
            trainer.log(Metric(values={"loss": 1.0 / (step + 1)}))
            trainer.log(Metric(values={"lr": 0.1}))
        run.flush()
        if step % 3 == 2:
            run.record_checkpoint(step)
    if finish:
        run.finish()
    return run_dir


def events(run: Path) -> list[tuple[str, int, str]]:
    return sorted(
        (r.envelope.writer, r.envelope.seq, r.event.model_dump_json()) for r in read_records(run)
    )


def verdict(ftaudit: Invoke, run: Path, *args: str) -> tuple[int, list[tuple[str, str]]]:
    result = ftaudit("verify", run, "--format", "json", "--require-finished", *args)
    assert result.exit_code in (0, 1), result.stderr
    found = [
        (v["code"], v["kind"])
        for r in json.loads(result.stdout)["results"]
        for v in r["violations"]
    ]
    return result.exit_code, sorted(found)


def segment_files(run: Path) -> list[Path]:
    return sorted(run.glob("events/*/*.parquet"))
