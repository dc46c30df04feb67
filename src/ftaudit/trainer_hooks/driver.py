"""The driver side of the hooks: one object the training driver calls a few times per step.

The driver owns the allocator (one per run, rebuilt from the log at resume) and is the
one process that decides which attempt of a step is accepted, so it logs the
allocations, the attempt and step ends, and the complete checkpoint marks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from ftaudit.dataset.manifest import DatasetManifest, read_manifest, write_manifest
from ftaudit.errors import UsageError
from ftaudit.eventlog.context import step_context
from ftaudit.eventlog.events import (
    AttemptEnd,
    CellOutcome,
    CheckpointRef,
    CheckpointSaved,
    DataManifest,
    DataOrder,
    LoaderState,
    Metric,
    RankOutcome,
    RunStatus,
    StepEnd,
)
from ftaudit.eventlog.identity import Driver
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.resume import ResumeIndex
from ftaudit.eventlog.run import RunLog
from ftaudit.eventlog.rundir import manifest_path
from ftaudit.eventlog.writer import EventWriter, WriterOptions
from ftaudit.trainer_hooks.allocator import (
    WitnessIdAllocator,
    WitnessInfo,
    max_ids_per_step,
    min_buffer_size,
    witness_allocated_event,
)


def should_retry(cells: Mapping[int, CellOutcome]) -> bool:
    """The miles acceptance policy: retry if every alive cell errored or any cell discarded.

    A mix of errored and normal cells is accepted: the dead cells died after exchanging
    gradients, so the survivors' update already holds the whole global batch.
    """
    if all(c.errored for c in cells.values()):  # also true with no cell at all
        return True
    return any(
        o is RankOutcome.DISCARDED_SHOULD_RETRY
        for c in cells.values()
        if not c.errored
        for o in c.ranks
    )


def allocator_from_index(index: ResumeIndex, buffer_size: int) -> WitnessIdAllocator:
    """Rebuild the allocator from the log: counter = highest ``counter_after`` ever logged.

    Taking the maximum over all incarnations (not the checkpoint's counter) means a
    resumed incarnation never re-issues an id that an abandoned one used, so weights that
    were not rolled back show up as extra ids. A run directory without events yields a
    fresh allocator. The ring cannot change size mid-run, so another logged buffer size
    is an error.
    """
    allocator = WitnessIdAllocator(buffer_size)
    if index.empty:
        return allocator  # nothing was ever logged (or durable): a fresh ring
    sizes = index.buffer_sizes - {buffer_size}
    if sizes:
        raise UsageError(
            f"{index.run_dir}: the run was started with buffer size {sorted(sizes)}, "
            f"not {buffer_size}; the witness ring cannot change size within a run"
        )
    allocator.resume(index.highest_counter())
    return allocator


def errored() -> CellOutcome:
    """A cell that crashed during the attempt."""
    return CellOutcome(errored=True)


def ranks(*outcomes: RankOutcome | str) -> CellOutcome:
    """A cell whose ranks reported ``outcomes`` (``"normal"`` or ``"discarded_should_retry"``)."""
    return CellOutcome(ranks=[RankOutcome(o) for o in outcomes])


class DriverSession:
    """One incarnation of a run as seen by the driver: allocate, decide, checkpoint, finish.

    Build it with :meth:`start`. A resumed incarnation (``resume_from`` set, or any
    incarnation after the first) rebuilds its allocator from the highest counter ever
    logged, performs and logs ``allocate(0)``, and exposes the stale slots in
    :attr:`resume_stale_ids`: every worker must zero them right after loading the
    checkpoint (:meth:`ftaudit.trainer_hooks.torch.TrainerHooks.clear_at_resume`).
    """

    def __init__(
        self,
        run: RunLog,
        allocator: WitnessIdAllocator,
        resume_from: CheckpointRef | None = None,
    ) -> None:
        self.run = run
        self.allocator = allocator
        self.resume_from = resume_from
        """The checkpoint this incarnation loaded (give it to the workers' ``load_checkpoint``)."""
        self.first_step = resume_from.iteration + 1 if resume_from is not None else 0
        """The step this incarnation starts at: the checkpoint iteration + 1, or 0."""
        self.writer: EventWriter = run.writer(Driver())
        self.resume_stale_ids: list[int] = []

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
        options: WriterOptions | None = None,
        index: ResumeIndex | None = None,
    ) -> DriverSession:
        """Open incarnation 0 in a fresh directory, or the next incarnation of a run.

        ``resume_from`` is the checkpoint this incarnation loaded (an iteration is looked
        up in the log). Training then continues at :attr:`first_step`. ``index`` is the
        run's :class:`ResumeIndex` when the caller already opened it (to pick the
        checkpoint): the log is then read once per resume, not twice.

        The sample indices given to :meth:`allocate` are positions in the run's data
        stream (a consumed-samples counter, see docs/trainer_hooks.md), and the verifier
        always checks that the committed ones form one contiguous range from 0 and that a
        replayed step trains what the abandoned one did. ``deterministic_order`` says how
        hard: True (the loader replays the same stream after a resume, e.g. a seeded
        sampler restored to its position) makes a hole, a changed replay, an epoch order
        changed at a resume or a position fed other content by another incarnation an
        error (FT005, FT008); False (declared non-deterministic) and None (undeclared, the
        default; the report notes it) make them warnings.
        """
        index = index if index is not None else ResumeIndex.open(run_dir)
        ref = index.checkpoint_at(resume_from) if isinstance(resume_from, int) else resume_from
        if isinstance(resume_from, int) and ref is None:
            raise UsageError(f"{run_dir}: no complete checkpoint at iteration {resume_from}")
        allocator = allocator_from_index(index, buffer_size)
        run = RunLog.start(
            run_dir,
            buffer_size=buffer_size,
            resume_from=ref,
            config=config,
            dataset_size=dataset_size,
            deterministic_order=deterministic_order,
            options=options,
        )
        session = cls(run, allocator, ref)
        first_step = session.first_step
        if run.incarnation > 0:
            # the slots the next allocations use were cleared on the abandoned timeline,
            # not in the restored weights: record them as stale before the first allocation
            info = allocator.allocate(0)
            session.writer.log(
                witness_allocated_event(
                    info,
                    [],
                    counter_after=allocator.counter,
                    buffer_size=buffer_size,
                    step=first_step,
                    attempt=0,
                )
            )
            session.writer.flush()
            session.resume_stale_ids = _slots_to_zero_at_resume(
                index, ref, info.stale_ids, allocator.counter, buffer_size
            )
        return session

    @property
    def incarnation(self) -> int:
        return self.run.incarnation

    @property
    def run_dir(self) -> Path:
        return self.run.run_dir

    @property
    def buffer_size(self) -> int:
        return self.allocator.buffer_size

    def allocate(
        self, step: int, attempt: int, sample_indices: Sequence[int] | np.ndarray
    ) -> WitnessInfo:
        """Witness ids for one attempt of a step, one per sample, logged before training.

        The allocation is flushed (durable) before this returns, so before its ids can
        reach any trainer: a crash can then never leave trainer evidence of ids the log
        does not know, which a resumed allocator would re-issue (FT009). Refuses more
        than ``B - keep`` samples: beyond that the ring cannot stay exact.
        Each attempt has this budget, however often a step is retried, provided every rank
        that discarded an attempt called ``TrainerHooks.after_discard`` before the retry;
        otherwise all attempts of a step share it (FT003 ``over_budget``).
        """
        n = len(sample_indices)
        limit = max_ids_per_step(self.buffer_size)
        if n > limit:
            raise UsageError(
                f"step {step} attempt {attempt} allocates {n} witness ids but a buffer of "
                f"{self.buffer_size} allows at most {limit} per attempt: increase the buffer "
                "size (B) to at least "
                f"{min_buffer_size(n)}"
            )
        info = self.allocator.allocate(n)
        self.writer.log(
            witness_allocated_event(
                info,
                sample_indices,
                counter_after=self.allocator.counter,
                buffer_size=self.buffer_size,
                step=step,
                attempt=attempt,
            )
        )
        self.writer.flush()
        return info

    def end_attempt(self, step: int, attempt: int, cells: Mapping[int, CellOutcome]) -> bool:
        """Apply the miles policy to an attempt; log it, and the step end when accepted.

        Returns True when the attempt is accepted (move on), False to retry the step.
        """
        accepted = not should_retry(cells)
        self.record_attempt_end(step, attempt, cells, accepted=accepted)
        if accepted:
            self.record_step_end(step, attempt, cells)
        return accepted

    def record_attempt_end(
        self, step: int, attempt: int, cells: Mapping[int, CellOutcome], *, accepted: bool
    ) -> None:
        """Log the decision on one attempt (for trainers with their own policy)."""
        self.writer.log(
            AttemptEnd(step=step, attempt=attempt, accepted=accepted, cells=dict(cells))
        )

    def record_step_end(
        self, step: int, accepted_attempt: int, cells: Mapping[int, CellOutcome]
    ) -> None:
        """Log that the driver moved on from ``step`` with ``accepted_attempt``; flushed."""
        self.writer.log(
            StepEnd(
                step=step,
                attempt=accepted_attempt,
                accepted_attempt=accepted_attempt,
                cells=dict(cells),
            )
        )
        self.writer.flush()

    def log_metrics(self, step: int, attempt: int, values: Mapping[str, float]) -> None:
        """Driver-side metrics of a step (NaN and inf are kept)."""
        with step_context(step, attempt):
            self.writer.log_fields(Metric, {k: float(v) for k, v in values.items()})

    def record_checkpoint(self, iteration: int, *, path: str = "") -> CheckpointSaved:
        """Checkpoint ``iteration`` is durable everywhere: mark it complete in the log.

        Call it after every worker returned from its save (their own snapshots are logged
        by the workers); a later incarnation can then resume from this iteration.
        """
        return self.run.record_checkpoint(iteration, path=path)

    def declare_manifest(
        self, manifest: DatasetManifest | str | os.PathLike[str], *, copy: bool = True
    ) -> DataManifest:
        """The run trains on this dataset: keep its manifest in the run and log its digest.

        ``manifest`` is a :class:`~ftaudit.dataset.DatasetManifest` or a manifest file
        (``ftaudit manifest``). With ``copy=False`` a file stays where it is and the run
        names it by digest only (``ft-verify --data-manifest PATH`` then finds it).
        """
        loaded = manifest if isinstance(manifest, DatasetManifest) else read_manifest(manifest)
        path = ""
        if copy:
            target = manifest_path(self.run_dir, loaded.digest)
            if not target.is_file():
                write_manifest(loaded, target)
            path = str(target.relative_to(self.run_dir))
        elif not isinstance(manifest, DatasetManifest):
            path = os.fspath(manifest)
        event = DataManifest(
            digest=loaded.digest,
            dataset_size=loaded.size,
            algorithm=loaded.algorithm,
            path=path,
        )
        self.writer.log(event)
        self.writer.flush()
        return event

    def log_data(self, event: DataOrder | LoaderState) -> None:
        """Log the loader's declared epoch order, or its state at a checkpoint or resume."""
        self.writer.log(event)

    def flush(self) -> None:
        self.run.flush()

    def finish(self, status: RunStatus = RunStatus.COMPLETED) -> None:
        """Log the end of this incarnation and close the driver's writers."""
        self.run.finish(status)


def _slots_to_zero_at_resume(
    index: ResumeIndex,
    checkpoint: CheckpointRef | None,
    stale_ids: list[int],
    counter: int,
    buffer_size: int,
) -> list[int]:
    """The logged ``allocate(0)`` stale slots, plus every slot allocated after the checkpoint.

    SPEC §2 zeroes the ``B - keep`` slots from the resumed counter. When the abandoned
    timeline allocated more than ``B - keep`` ids after the checkpoint, it re-allocated
    slots whose restored rows still hold older, committed (and already checked) evidence;
    left alone they would read as abandoned work leaking into the weights. Zeroing every
    slot whose latest allocation was abandoned keeps the rows exact. Weights that were not
    rolled back are then caught by the restore checksums (FT006), not by the witness.
    """
    if checkpoint is None:
        return stale_ids  # a restart from nothing: fresh, all-zero witnesses
    start = index.counter_at(checkpoint)
    abandoned = IntRuns.arc(start, min(counter - start, buffer_size), buffer_size).to_list()
    return sorted(set(stale_ids) | set(abandoned))
