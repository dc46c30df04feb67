"""A run directory and its incarnations: start, resume from a checkpoint, attach workers.

Incarnation numbers are claimed by creating ``RUN_DIR/incarnations/<k>`` (an atomic
mkdir), so two launches can never take the same number. Resuming deletes nothing: the
events of abandoned incarnations stay on disk for the verifier.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from ftaudit.errors import UsageError
from ftaudit.eventlog.atomic import fsync_dir
from ftaudit.eventlog.events import (
    CheckpointRef,
    CheckpointSaved,
    RunFinished,
    RunStarted,
    RunStatus,
    WriterHead,
)
from ftaudit.eventlog.heads import disk_heads
from ftaudit.eventlog.identity import Driver, Identity
from ftaudit.eventlog.resume import CompleteCheckpoint, ResumeIndex
from ftaudit.eventlog.rundir import (
    INCARNATIONS_DIR,
    RUN_FILE,
    incarnation_dir,
    read_run_id,
)
from ftaudit.eventlog.writer import EventWriter, WriterOptions


def _run_id(root: Path) -> str:
    """The run's id, created on first use: written whole to a temp file, then linked into
    place (``link`` fails if the file exists), so concurrent starters agree and none ever
    reads a half-written ``run.json``."""
    path = root / RUN_FILE
    if path.exists():
        return read_run_id(root)
    run_id = uuid.uuid4().hex
    tmp = root / f".{RUN_FILE}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump({"run_id": run_id}, f)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return read_run_id(root)  # another starter won
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(root)
    return run_id


def _claim_incarnation(root: Path) -> int:
    folder = root / INCARNATIONS_DIR
    folder.mkdir(exist_ok=True)
    k = len(list(folder.iterdir()))
    while True:
        try:
            incarnation_dir(root, k).mkdir()
        except FileExistsError:
            k += 1
            continue
        fsync_dir(folder)
        return k


def find_checkpoint(run_dir: str | os.PathLike[str], iteration: int) -> CheckpointRef | None:
    """The newest complete checkpoint at ``iteration`` in the log, if any."""
    return ResumeIndex.open(run_dir).checkpoint_at(iteration)


def complete_checkpoints(run_dir: str | os.PathLike[str]) -> list[CompleteCheckpoint]:
    """Every checkpoint the driver marked complete, in log order."""
    return list(ResumeIndex.open(run_dir).checkpoints)


def latest_checkpoint(run_dir: str | os.PathLike[str]) -> CompleteCheckpoint | None:
    """The newest complete checkpoint of the run, or None (see
    :meth:`ResumeIndex.latest_checkpoint`)."""
    return ResumeIndex.open(run_dir).latest_checkpoint()


class RunLog:
    """One incarnation of a run, as seen by one process: its writers and snapshots."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        run_id: str,
        incarnation: int,
        options: WriterOptions | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.incarnation = incarnation
        self.options = options or WriterOptions()
        self._writers: dict[Identity, EventWriter] = {}

    @classmethod
    def start(
        cls,
        run_dir: str | os.PathLike[str],
        *,
        buffer_size: int,
        resume_from: CheckpointRef | int | None = None,
        config: dict[str, object] | None = None,
        dataset_size: int | None = None,
        deterministic_order: bool | None = None,
        source: Identity = Driver(),
        options: WriterOptions | None = None,
    ) -> RunLog:
        """Open a new incarnation: 0 in an empty directory, else the next free number.

        ``resume_from`` names the checkpoint this incarnation loaded (an iteration is
        looked up in the log); None with an earlier incarnation is a restart from nothing.
        """
        root = Path(run_dir)
        root.mkdir(parents=True, exist_ok=True)
        run_id = _run_id(root)
        if isinstance(resume_from, int):
            ref = find_checkpoint(root, resume_from)
            if ref is None:
                raise UsageError(f"{root}: no complete checkpoint at iteration {resume_from}")
            resume_from = ref
        incarnation = _claim_incarnation(root)
        if incarnation == 0 and resume_from is not None:
            raise UsageError(f"{root}: incarnation 0 cannot resume from a checkpoint")
        run = cls(root, run_id, incarnation, options)
        writer = run.writer(source)
        writer.log(
            RunStarted(
                resumed_from=resume_from,
                buffer_size=buffer_size,
                config_json=json.dumps(config or {}, sort_keys=True, default=str),
                dataset_size=dataset_size,
                deterministic_order=deterministic_order,
            )
        )
        writer.flush()
        return run

    @classmethod
    def attach(
        cls, run_dir: str | os.PathLike[str], incarnation: int, options: WriterOptions | None = None
    ) -> RunLog:
        """Join an incarnation that a driver started (from a worker process)."""
        root = Path(run_dir)
        if not incarnation_dir(root, incarnation).is_dir():
            raise UsageError(f"{root}: incarnation {incarnation} was never started")
        return cls(root, _run_id(root), incarnation, options)

    def writer(self, source: Identity) -> EventWriter:
        """This process's writer for ``source`` (created on first use)."""
        writer = self._writers.get(source)
        if writer is None:
            writer = EventWriter(
                self.run_dir,
                source,
                run_id=self.run_id,
                incarnation=self.incarnation,
                options=self.options,
            )
            self._writers[source] = writer
        return writer

    def record_checkpoint(
        self,
        iteration: int,
        *,
        path: str = "",
        source: Identity = Driver(),
        complete: bool | None = None,
    ) -> CheckpointSaved:
        """Checkpoint ``iteration`` is durable: flush, then log the snapshot of this process.

        The snapshot is each of this process's writers' last durable sequence number and
        the head of its hash chain: O(writers), nothing is copied. ``complete`` defaults to
        True for the driver.
        """
        writer = self.writer(source)
        snapshot: dict[str, int] = {}
        heads: dict[str, str] = {}
        for w in self._writers.values():
            w.flush()
            snapshot[w.writer_id], heads[w.writer_id] = w.chain_head
        complete = isinstance(source, Driver) if complete is None else complete
        event = CheckpointSaved(
            iteration=iteration,
            path=path,
            writers=snapshot,
            chain_heads={k: v for k, v in heads.items() if v},
            complete=complete,
            job_heads=self.job_heads() if complete else {},
        )
        writer.log(event)
        writer.flush()
        return event

    def flush(self) -> None:
        for writer in self._writers.values():
            writer.flush()

    def job_heads(self) -> dict[str, WriterHead]:
        """The head of every writer of the run: this process's after a flush (from memory),
        every other process's from the run directory (see :mod:`ftaudit.eventlog.heads`)."""
        heads = disk_heads(self.run_dir)
        for w in self._writers.values():
            w.flush()
            seq, digest = w.chain_head
            if seq >= 0:
                heads[w.writer_id] = WriterHead(last_seq=seq, digest=digest)
        return dict(sorted(heads.items()))

    def finish(self, status: RunStatus = RunStatus.COMPLETED, source: Identity = Driver()) -> None:
        """Log the end of this incarnation, with every writer's final head, and close."""
        self.writer(source).log(RunFinished(status=status, final_heads=self.job_heads()))
        self.close()

    def close(self) -> None:
        for writer in self._writers.values():
            writer.close()
