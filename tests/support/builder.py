"""Write runs for verifier tests through the public event API, into real Parquet segments.

:class:`RunBuilder` has two levels. Low level (``alloc``, ``snapshot``, ``step_end``...)
logs exactly the events a case spells out. High level (``train``) also simulates the
witness rows of each cell's weights the way SPEC §3 says the model behaves (gradient
makes the rows of the trained ids nonzero, committed steps clear the stale rows, a
restore brings back the checkpoint's rows), so whole-run cases need no hand-made sets.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ftaudit.dataset import DatasetManifest
from ftaudit.eventlog import (
    AttemptEnd,
    CellOutcome,
    ChecksumWhen,
    Driver,
    Engine,
    EngineWeightChecksum,
    EventWriter,
    IntRuns,
    RankOutcome,
    RunLog,
    SampleAdvantageSummary,
    StateAdopted,
    StepEnd,
    Trainer,
    TrainerWeightChecksum,
    WitnessCleared,
    WitnessSnapshot,
    WriterOptions,
    find_checkpoint,
)
from ftaudit.eventlog.events import (
    CheckpointRef,
    DataOrder,
    LoaderState,
    LoaderWhen,
    SampleFingerprints,
)
from ftaudit.trainer_hooks import DriverSession
from ftaudit.trainer_hooks.allocator import WitnessIdAllocator, witness_allocated_event

OPTIONS = WriterOptions(fsync=False, flush_interval_s=3600)
NORMAL = CellOutcome(ranks=[RankOutcome.NORMAL])
DISCARDED = CellOutcome(ranks=[RankOutcome.DISCARDED_SHOULD_RETRY])
ERRORED = CellOutcome(errored=True)
HEAD = "chunk0.head"
TAIL = "chunk0.tail"


def runs(ids: Iterable[int]) -> IntRuns:
    return IntRuns.from_ids(list(ids))


@dataclass
class Incarnation:
    """One launch of the job: its log, its allocator, and the witness rows of each cell."""

    builder: RunBuilder
    log: RunLog
    allocator: WitnessIdAllocator
    weights: dict[int, set[int]] = field(default_factory=dict)
    last_stale: list[int] = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.log.incarnation

    @property
    def driver(self) -> EventWriter:
        return self.log.writer(Driver())

    def trainer(self, cell: int, rank: int = 0) -> EventWriter:
        return self.log.writer(Trainer(cell_index=cell, rank_within_cell=rank))

    # -- low level: exactly these events ---------------------------------------------
    def alloc(
        self,
        step: int,
        samples: Sequence[int],
        attempt: int = 0,
        **override: object,
    ) -> list[int]:
        """Allocate one id per sample with the real allocator and log it (fields of the
        logged event can be overridden to fake a broken allocator)."""
        info = self.allocator.allocate(len(samples))
        event = witness_allocated_event(
            info,
            list(samples),
            counter_after=self.allocator.counter,
            buffer_size=self.builder.B,
            step=step,
            attempt=attempt,
        )
        if override:
            event = event.model_copy(update=override)
        self.driver.log(event)
        self.builder.max_counter = max(self.builder.max_counter, self.allocator.counter)
        self.last_stale = info.stale_ids
        return info.witness_ids

    def snapshot(
        self,
        step: int,
        nonzero: Iterable[int],
        *,
        attempt: int = 0,
        cell: int = 0,
        rank: int = 0,
        instance: str = HEAD,
        stale: Iterable[int] | None = None,
    ) -> None:
        """A witness snapshot; stale ids default to the last allocation's."""
        self.trainer(cell, rank).log(
            WitnessSnapshot(
                step=step,
                attempt=attempt,
                cell=cell,
                instance=instance,
                nonzero_ids=runs(nonzero),
                stale_ids=runs(self.last_stale if stale is None else stale),
            )
        )

    def cleared(self, step: int, attempt: int, *, cell: int, stale: Sequence[int]) -> None:
        """A rank zeroed ``stale`` after a discarded attempt (``witness_cleared``)."""
        self.weights.setdefault(cell, set()).difference_update(stale)
        self.trainer(cell).log(
            WitnessCleared(step=step, attempt=attempt, cell=cell, stale_ids=runs(stale))
        )

    def advantage(
        self,
        step: int,
        ids: Sequence[int],
        *,
        zero: Sequence[bool],
        tokens: Sequence[int] | None = None,
        attempt: int = 0,
        cell: int = 0,
        rank: int = 0,
        pure: bool | None = None,
    ) -> None:
        self.trainer(cell, rank).log(
            SampleAdvantageSummary(
                step=step,
                attempt=attempt,
                cell=cell,
                witness_ids=list(ids),
                token_counts=list(tokens) if tokens is not None else [4] * len(ids),
                all_zero=list(zero),
                pure_advantage_loss=pure,
            )
        )

    def step_end(
        self, step: int, cells: Mapping[int, CellOutcome] | None = None, attempt: int = 0
    ) -> None:
        cells = dict(cells) if cells is not None else {c: NORMAL for c in range(self.builder.cells)}
        self.driver.log(AttemptEnd(step=step, attempt=attempt, accepted=True, cells=cells))
        self.driver.log(StepEnd(step=step, attempt=attempt, accepted_attempt=attempt, cells=cells))

    def retried(self, step: int, attempt: int, cells: Mapping[int, CellOutcome]) -> None:
        self.driver.log(AttemptEnd(step=step, attempt=attempt, accepted=False, cells=dict(cells)))

    def checkpoint(self, iteration: int) -> None:
        """Save checkpoint ``iteration``: remember each cell's rows, mark it complete."""
        self.builder.saved[(iteration, self.number)] = {
            c: set(rows) for c, rows in self.weights.items()
        }
        self.log.record_checkpoint(iteration)

    def checksum(
        self,
        step: int | None,
        cell: int,
        hashes: Mapping[str, str],
        *,
        rank: int = 0,
        attempt: int | None = 0,
        when: ChecksumWhen = ChecksumWhen.AFTER_STEP,
        checkpoint: CheckpointRef | None = None,
        source_cell: int | None = None,
        replica_local: Sequence[str] = (),
    ) -> None:
        self.trainer(cell, rank).log(
            TrainerWeightChecksum(
                step=step,
                attempt=attempt,
                when=when,
                cell=cell,
                rank=rank,
                hashes=dict(hashes),
                checkpoint=checkpoint,
                heal_source=source_cell,
                replica_local=list(replica_local),
            )
        )

    def engines(self, step: int | None, engines: Mapping[int, Mapping[str, str]]) -> None:
        self.log.writer(Engine(engine_index=0)).log(
            EngineWeightChecksum(
                step=step, attempt=None if step is None else 0, engines=dict(engines)
            )
        )

    def fed(
        self,
        step: int,
        positions: Sequence[int],
        fingerprints: Sequence[int],
        *,
        attempt: int = 0,
        cell: int = 0,
        rank: int = 0,
        items: Sequence[int] = (),
    ) -> None:
        """What one rank fed the model: a ``SampleFingerprints`` event."""
        self.trainer(cell, rank).log(
            SampleFingerprints(
                step=step,
                attempt=attempt,
                cell=cell,
                sample_indices=IntRuns.from_sequence(positions),
                fingerprints=list(fingerprints),
                items=list(items),
            )
        )

    def declare(self, manifest: DatasetManifest, *, copy: bool = True) -> None:
        """The run's dataset manifest, declared the way the driver hooks do it."""
        DriverSession(self.log, self.allocator).declare_manifest(manifest, copy=copy)

    def order(
        self, epoch: int, start: int, items: Sequence[int], *, size: int, seed: int | None = None
    ) -> None:
        self.driver.log(
            DataOrder(epoch=epoch, start=start, items=list(items), dataset_size=size, seed=seed)
        )

    def loader(
        self,
        iteration: int,
        when: str,
        position: int,
        *,
        epoch: int = 0,
        seed: int | None = None,
    ) -> None:
        self.driver.log(
            LoaderState(
                iteration=iteration,
                when=LoaderWhen(when),
                position=position,
                epoch=epoch,
                seed=seed,
            )
        )

    def flush(self) -> None:
        self.log.flush()

    def finish(self) -> None:
        self.log.finish()

    # -- high level: simulate the witness rows ---------------------------------------
    def train(
        self,
        step: int,
        samples: Sequence[int],
        *,
        attempt: int = 0,
        cells: Mapping[int, CellOutcome] | None = None,
        zero_advantage: Sequence[int] = (),
        instances: Sequence[str] = (HEAD,),
        clear_on_discard: bool = True,
        unseen: Mapping[tuple[int, str], Sequence[int]] | None = None,
    ) -> list[int]:
        """One attempt of a step as a correct trainer runs it.

        Normal cells apply the gradient of every sample but zero-advantage ones; an
        accepted attempt logs the snapshot of each normal cell, then clears the stale
        rows; a retried attempt changes no weights but (``clear_on_discard``) zeroes its
        stale rows in every cell still alive, as ``TrainerHooks.after_discard`` does.
        ``unseen[(cell, instance)]`` lists samples that this attempt's snapshot of that
        instance does not show (a lost sample, the defect FT004 reports).
        """
        cells = dict(cells) if cells is not None else {c: NORMAL for c in range(self.builder.cells)}
        ids = self.alloc(step, samples, attempt)
        stale = self.last_stale
        accepted = not (
            all(c.errored for c in cells.values())
            or any(
                c.ranks and RankOutcome.DISCARDED_SHOULD_RETRY in c.ranks for c in cells.values()
            )
        )
        zero = set(zero_advantage)
        if zero:
            self.advantage(step, ids, zero=[s in zero for s in samples], attempt=attempt, cell=0)
        if not accepted:
            for cell, outcome in cells.items():
                if clear_on_discard and not outcome.errored:
                    self.cleared(step, attempt, cell=cell, stale=stale)
            self.retried(step, attempt, cells)
            return ids
        trained = {i for i, s in zip(ids, samples, strict=True) if s not in zero}
        id_of = dict(zip(samples, ids, strict=True))
        for cell, outcome in cells.items():
            rows = self.weights.setdefault(cell, set())
            if outcome.errored:
                continue
            rows |= trained
            for instance in instances:
                lost = {id_of[s] for s in (unseen or {}).get((cell, instance), ())}
                shown = sorted(rows - lost)
                self.snapshot(step, shown, attempt=attempt, cell=cell, instance=instance)
            rows -= set(stale)
        self.step_end(step, cells, attempt)
        return ids


@dataclass
class RunBuilder:
    """A run directory under construction."""

    root: Path
    B: int = 10
    cells: int = 1
    max_counter: int = 0
    saved: dict[tuple[int, int], dict[int, set[int]]] = field(default_factory=dict)
    open: list[Incarnation] = field(default_factory=list)

    def start(
        self,
        resume_from: int | None = None,
        *,
        deterministic_order: bool | None = None,
        dataset_size: int | None = None,
        resume_counter: int | None = None,
        restore_evidence: bool = True,
    ) -> Incarnation:
        """A new incarnation. A resumed one restores the checkpoint's rows, resumes the
        allocator from the highest logged counter (or ``resume_counter``), logs
        ``allocate(0)`` and zeroes its stale rows, like the hooks do.

        With ``restore_evidence`` each cell's rank 0 also says what it restored (FT009):
        a ``state_adopted`` event, since the builder restores witness rows, not tensors
        with checksums (a case that logs its own ``after_load`` turns it off)."""
        ref = find_checkpoint(self.root, resume_from) if resume_from is not None else None
        log = RunLog.start(
            self.root,
            buffer_size=self.B,
            resume_from=ref,
            deterministic_order=deterministic_order,
            dataset_size=dataset_size,
            options=OPTIONS,
        )
        allocator = WitnessIdAllocator(self.B)
        inc = Incarnation(self, log, allocator)
        self.open.append(inc)
        if log.incarnation == 0:
            inc.weights = {c: set() for c in range(self.cells)}
            return inc
        allocator.resume(self.max_counter if resume_counter is None else resume_counter)
        saved = self.saved.get((ref.iteration, ref.incarnation), {}) if ref else {}
        inc.weights = {c: set(saved.get(c, set())) for c in range(self.cells)}
        first = ref.iteration + 1 if ref else 0
        if restore_evidence and ref is not None:
            for cell in range(self.cells):
                inc.trainer(cell).log(
                    StateAdopted(
                        step=ref.iteration,
                        cell=cell,
                        rank=0,
                        reason="the builder restored the checkpoint's witness rows",
                        checkpoint=ref,
                    )
                )
        inc.alloc(first, [])
        for rows in inc.weights.values():
            rows -= set(inc.last_stale)
        return inc

    def close(self) -> None:
        for inc in self.open:
            inc.log.close()

    def delete_segment(self, writer_prefix: str, index: int) -> Path:
        """Remove the ``index``-th segment of the first writer whose id starts with the prefix."""
        folder = next(
            p for p in sorted((self.root / "events").iterdir()) if p.name.startswith(writer_prefix)
        )
        path = sorted(folder.iterdir())[index]
        path.unlink()
        return path

    def remove(self) -> None:
        shutil.rmtree(self.root)
