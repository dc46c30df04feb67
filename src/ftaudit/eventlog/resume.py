"""What a resuming driver asks of its run's log, answered from one read of the run.

A new incarnation needs: the latest complete checkpoint (or the one at an iteration),
the highest allocator counter ever logged, the counter when that checkpoint was saved,
and the buffer sizes earlier incarnations declared. :meth:`ResumeIndex.open` lists the
run once (:func:`~ftaudit.eventlog.rundir.list_segments`), checks every footer like any
reader, and reads only the few columns of the driver-side events those questions need,
with pyarrow: a training process resumes without importing DuckDB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.events import CheckpointRef
from ftaudit.eventlog.reader import UNREADABLE, check_segment, superseded
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.rundir import list_segments

_ALLOCATED = default_registry["witness_allocated"]
_STARTED = default_registry["run_started"]
_SAVED = default_registry["checkpoint_saved"]
_COUNTER = _ALLOCATED.column("counter_after")
_BUFFER = _STARTED.column("buffer_size")
_ITERATION = _SAVED.column("iteration")
_COMPLETE = _SAVED.column("complete")
_PATH = _SAVED.column("path")
_WANTED = ("type", "incarnation", "seq", "step", _COUNTER, _BUFFER, _ITERATION, _COMPLETE, _PATH)
_TYPES = frozenset({_ALLOCATED.name, _STARTED.name, _SAVED.name})


def _column(table: pa.Table, name: str, rows: pa.Array) -> np.ndarray:
    """``name`` at the ``rows`` mask as int64 (-1 where absent or null)."""
    if name not in table.column_names:
        return np.full(pc.sum(rows).as_py() or 0, -1, dtype=np.int64)
    values = table[name].filter(rows)
    if pa.types.is_boolean(values.type):
        values = pc.cast(values, pa.int64())
    return pc.fill_null(values, -1).to_numpy().astype(np.int64, copy=False)


@dataclass(frozen=True)
class CompleteCheckpoint:
    """A checkpoint the driver marked complete: its name in the log and where it was saved."""

    ref: CheckpointRef
    path: str


def _complete(table: pa.Table) -> list[tuple[int, int, CompleteCheckpoint]]:
    """``(incarnation, seq, checkpoint)`` of the complete checkpoint marks in ``table``."""
    if _COMPLETE not in table.column_names:
        return []
    marks = table.filter(pc.equal(table["type"], _SAVED.name))
    marks = marks.filter(pc.fill_null(marks[_COMPLETE], False))
    paths = marks[_PATH].to_pylist() if _PATH in marks.column_names else [""] * marks.num_rows
    return [
        (inc, seq, CompleteCheckpoint(CheckpointRef(iteration=it, incarnation=inc), path or ""))
        for inc, seq, it, path in zip(
            marks["incarnation"].to_pylist(),
            marks["seq"].to_pylist(),
            marks[_ITERATION].to_pylist(),
            paths,
            strict=True,
        )
        if it is not None
    ]


@dataclass(frozen=True, eq=False)
class ResumeIndex:
    """The resume facts of a run (an empty index for a directory without segments)."""

    run_dir: Path
    segments: int
    """How many sealed segments the run held when opened (not counting the originals a
    compaction cut short left beside the segment that holds them)."""
    checkpoints: tuple[CompleteCheckpoint, ...]
    """Every checkpoint the driver marked complete, in log order (incarnation, then seq)."""
    alloc_incarnation: np.ndarray
    alloc_step: np.ndarray
    alloc_counter: np.ndarray
    """One entry per logged allocation: incarnation, step and ``counter_after``."""
    buffer_sizes: frozenset[int]
    """Every buffer size an incarnation declared at its start."""

    @classmethod
    def open(cls, run_dir: str | os.PathLike[str]) -> ResumeIndex:
        """Read the run once; raises ``UnusableInputError`` naming a bad file."""
        listing = list_segments(run_dir, allow_empty=True)
        incarnation: list[np.ndarray] = []
        step: list[np.ndarray] = []
        counter: list[np.ndarray] = []
        checkpoints: list[tuple[int, int, CompleteCheckpoint]] = []
        sizes: set[int] = set()
        infos = tuple(check_segment(file) for file in listing.files)
        # a compaction cut short leaves originals its merged segment holds: read once
        leftovers = superseded(infos)
        live = [info for info in infos if info.path not in leftovers]
        for info in live:
            if not _TYPES & set(info.meta.types):
                continue
            try:
                table = pq.read_table(
                    info.path, columns=[c for c in _WANTED if c in info.schema.names]
                )
            except UNREADABLE as exc:
                raise CorruptSegmentError(info.path, f"unreadable ({exc})") from None
            kinds = table["type"]
            rows = pc.equal(kinds, _ALLOCATED.name)
            incarnation.append(_column(table, "incarnation", rows))
            step.append(_column(table, "step", rows))
            counter.append(_column(table, _COUNTER, rows))
            rows = pc.equal(kinds, _STARTED.name)
            sizes.update(int(b) for b in _column(table, _BUFFER, rows) if b >= 0)
            checkpoints += _complete(table)

        def joined(parts: list[np.ndarray]) -> np.ndarray:
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        ordered = tuple(c for _, _, c in sorted(checkpoints, key=lambda m: m[:2]))
        return cls(
            listing.run_dir,
            len(live),
            ordered,
            joined(incarnation),
            joined(step),
            joined(counter),
            frozenset(sizes),
        )

    @property
    def empty(self) -> bool:
        """Nothing was ever durably logged: a new run starts from a fresh ring."""
        return self.segments == 0

    def latest_checkpoint(self) -> CompleteCheckpoint | None:
        """The newest complete checkpoint, or None (nothing to resume from).

        Newest means saved last: the highest (incarnation, iteration). A later incarnation's
        checkpoint supersedes an earlier one's even at a lower iteration, since that
        incarnation resumed from an older state. This is what a launcher restarting a job
        (torchrun, an elastic agent, the demo) resumes from.
        """
        return max(
            self.checkpoints,
            key=lambda c: (c.ref.incarnation, c.ref.iteration),
            default=None,
        )

    def complete_at(self, iteration: int) -> CompleteCheckpoint | None:
        """The newest complete checkpoint at ``iteration`` (highest incarnation), if any."""
        found = [c for c in self.checkpoints if c.ref.iteration == iteration]
        return max(found, key=lambda c: c.ref.incarnation, default=None)

    def checkpoint_at(self, iteration: int) -> CheckpointRef | None:
        """The reference of :meth:`complete_at`."""
        found = self.complete_at(iteration)
        return found.ref if found is not None else None

    def highest_counter(self) -> int:
        """The highest ``counter_after`` ever logged, across every incarnation (0 if none)."""
        return max(int(self.alloc_counter.max()), 0) if self.alloc_counter.size else 0

    def counter_at(self, checkpoint: CheckpointRef) -> int:
        """The allocator's counter when ``checkpoint`` was saved: the highest
        ``counter_after`` its saving incarnation logged for steps up to the checkpoint
        iteration (0 if none)."""
        mask = (self.alloc_incarnation == checkpoint.incarnation) & (
            (self.alloc_step >= 0) & (self.alloc_step <= checkpoint.iteration)
        )
        return int(self.alloc_counter[mask].max()) if mask.any() else 0
