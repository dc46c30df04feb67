"""Real run directories for the CLI tests, written through the public event-log API.

A small fault-free run: one driver, two cells of one trainer rank each, a head and a
tail witness instance, every step accepted at attempt 0. Witness ids follow the
allocator of SPEC §2 (replayed here from its formula, so the tests do not lean on the
trainer hooks), and each snapshot shows exactly the slots that should be nonzero.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog import (
    CellOutcome,
    ChecksumWhen,
    Driver,
    IntRuns,
    RankOutcome,
    RunLog,
    StepEnd,
    Trainer,
    TrainerWeightChecksum,
    WitnessAllocated,
    WitnessSnapshot,
    step_context,
)
from ftaudit.eventlog.ring import keep_size

INSTANCES = ("pp0_chunk0.head", "pp0_chunk0.tail")


@dataclass(frozen=True)
class RunShape:
    buffer_size: int = 20
    steps: int = 4
    samples_per_step: int = 4
    cells: int = 2
    drop_id_at_step: int | None = None
    """Leave one expected id out of cell 0's head snapshot at this step (a lost sample)."""


def _arc(start: int, count: int, ring: int) -> list[int]:
    return [(start + i) % ring for i in range(count)]


def write_run(run_dir: Path, shape: RunShape = RunShape()) -> Path:
    """Write a complete, finished run; with ``drop_id_at_step`` one sample goes missing."""
    B, n = shape.buffer_size, shape.samples_per_step
    keep = keep_size(B)
    run = RunLog.start(
        run_dir,
        buffer_size=B,
        dataset_size=shape.steps * n,
        deterministic_order=True,
    )
    driver = run.writer(Driver())
    trainers = [run.writer(Trainer(cell_index=c, rank_within_cell=0)) for c in range(shape.cells)]
    counter = 0
    live: set[int] = set()  # slots allocated and not yet cleared: what the weights show
    for step in range(shape.steps):
        with step_context(step, 0):
            ids = _arc(counter, n, B)
            counter += n
            stale = _arc(counter % B, B - min(keep, counter, B), B) if counter else []
            driver.log(
                WitnessAllocated(
                    num_ids=n,
                    counter_after=counter,
                    witness_ids=IntRuns.from_sequence(ids),
                    sample_indices=IntRuns.from_sequence(range(step * n, step * n + n)),
                    stale_ids=IntRuns.from_ids(stale),
                )
            )
            live |= set(ids)
            for cell, writer in enumerate(trainers):
                for instance in INSTANCES:
                    nonzero = set(live)
                    if step == shape.drop_id_at_step and cell == 0 and instance == INSTANCES[0]:
                        nonzero.discard(ids[0])
                    writer.log(
                        WitnessSnapshot(
                            cell=cell,
                            instance=instance,
                            nonzero_ids=IntRuns.from_ids(nonzero),
                            stale_ids=IntRuns.from_ids(stale),
                        )
                    )
                writer.log(
                    TrainerWeightChecksum(
                        when=ChecksumWhen.AFTER_STEP,
                        cell=cell,
                        rank=0,
                        hashes={"layer.weight": f"w{step}", "witness.head": f"h{step}"},
                    )
                )
            live -= set(stale)
            driver.log(
                StepEnd(
                    accepted_attempt=0,
                    cells={c: CellOutcome(ranks=[RankOutcome.NORMAL]) for c in range(shape.cells)},
                )
            )
    run.flush()
    run.record_checkpoint(shape.steps - 1)
    run.finish()
    return run_dir


def segments(run_dir: Path) -> list[Path]:
    """Every sealed segment of a run, sorted."""
    return sorted((run_dir / "events").glob("*/*.parquet"))


def write_foreign_parquet(run_dir: Path) -> Path:
    """A valid Parquet file that no ftaudit writer made, named like a segment."""
    target = next((run_dir / "events").iterdir()) / "000000999999.parquet"
    pq.write_table(pa.table({"loss": [0.5, 0.25], "step": [0, 1]}), target)
    return target


def leave_torn_flush(run_dir: Path) -> Path:
    """The temp file a writer leaves when it is killed mid-flush (a warning, not an error)."""
    writer_dir = next(p for p in sorted((run_dir / "events").iterdir()) if p.is_dir())
    torn = writer_dir / ".000000999999.parquet.4242.tmp"
    torn.write_bytes(b"PAR1 half a row group")
    return torn
