"""ftaudit inside a ``torch.distributed`` job: one call per process, the driver on rank 0.

Under torchrun (or any launcher that initialises a process group) every process runs the
same script. :meth:`DistributedRun.start` hosts the :class:`DriverSession` on rank 0 and
tells every rank what it decided: the incarnation (claimed from the log, so a torchrun
restart is simply the next incarnation), the checkpoint to resume from (the latest
complete one) and the slots to zero after loading it. Each step, the sample indices every
rank loaded are gathered on rank 0, allocated there in rank order, and each rank gets
the witness ids of its own samples back; the ranks' outcomes go the same way to the
driver's acceptance policy. Cells and ranks follow the strategy (:class:`CellMap`).

Collectives run on the default process group, in the same order on every rank; an error
on rank 0 (too many ids for the ring, say) is raised on every rank instead of leaving
the others waiting in a collective.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from ftaudit.errors import UsageError
from ftaudit.eventlog.events import CellOutcome, RankOutcome, RunStatus
from ftaudit.eventlog.resume import CompleteCheckpoint, ResumeIndex
from ftaudit.eventlog.writer import WriterOptions
from ftaudit.trainer_hooks.allocator import WitnessInfo
from ftaudit.trainer_hooks.driver import DriverSession
from ftaudit.trainer_hooks.faults import FaultSchedule
from ftaudit.trainer_hooks.torch.cells import CellMap, Strategy
from ftaudit.trainer_hooks.torch.state_io import Layout
from ftaudit.trainer_hooks.torch.state_scalars import Stateful
from ftaudit.trainer_hooks.torch.worker import TrainerHooks

T = TypeVar("T")

Resume = Literal["latest"] | int | None
"""``"latest"``: the latest complete checkpoint (none: start from step 0); an iteration:
the newest complete checkpoint at it; None: never resume (a restart from nothing)."""

RANK_FIELD = "{rank}"
"""In a checkpoint path: every process saves (and loads) its own file, named by its
global rank. Without it rank 0 saves the one (full) file every rank loads."""


@dataclass(frozen=True)
class _Answer:
    """What rank 0 decided, or why it could not: sent to every rank."""

    value: Any = None
    error: str | None = None


@dataclass(frozen=True)
class _Opening:
    """Rank 0's opening decisions, broadcast at :meth:`DistributedRun.start`."""

    incarnation: int
    first_step: int
    resume: CompleteCheckpoint | None
    resume_stale_ids: list[int]


class DistributedRun:
    """One process of a ``torch.distributed`` job as ftaudit sees it.

    ``hooks`` is this rank's :class:`TrainerHooks` (witness snapshots, checksums,
    metrics, faults); ``driver`` is the :class:`DriverSession`, on rank 0 only. A step::

        info = run.allocate(step, 0, my_sample_indices)
        with run.hooks.step(step, 0), run.hooks.batch(sample_token_ids(info.witness_ids, seq)):
            loss_fn(model(x)).backward()
            optimizer.step()
            run.hooks.after_optimizer_step(info.stale_ids)
        run.end_attempt(step, 0)
    """

    def __init__(
        self,
        hooks: TrainerHooks,
        cells: CellMap,
        places: list[tuple[int, int]],
        opening: _Opening,
        driver: DriverSession | None,
    ) -> None:
        self.hooks = hooks
        self.cells = cells
        self.places = places
        """(cell, rank) of every process, by global rank."""
        self.driver = driver
        self.incarnation = opening.incarnation
        self.first_step = opening.first_step
        """The step this incarnation starts at: the resumed checkpoint's iteration + 1, or 0."""
        self.resume = opening.resume
        """The checkpoint to load before training (:meth:`load_checkpoint`), or None."""
        self.resume_stale_ids = opening.resume_stale_ids
        self.global_rank = dist.get_rank()
        self._accepted: dict[int, int] = {}

    @classmethod
    def start(
        cls,
        run_dir: str | os.PathLike[str],
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        buffer_size: int,
        dataset_size: int | None = None,
        deterministic_order: bool | None = None,
        resume: Resume = "latest",
        strategy: Strategy | None = None,
        config: dict[str, object] | None = None,
        faults: FaultSchedule | None = None,
        options: WriterOptions | None = None,
        stateful: Mapping[str, Stateful] | None = None,
    ) -> DistributedRun:
        """Open this process's part of the run; every process of the group calls it.

        Rank 0 starts the next incarnation (0 in a fresh directory) and resumes from the
        latest complete checkpoint of the log; every rank then attaches as the trainer
        ``(cell, rank)`` of ``strategy`` (read from how ``model`` is wrapped when None).
        The run directory must be on a file system every process sees.

        ``stateful`` registers this rank's objects whose ``state_dict()`` is part of the
        training state (LR scheduler, grad scaler, sampler): hashed with the weights,
        saved and loaded with each checkpoint, and a scheduler's ``last_epoch`` counted
        (:class:`TrainerHooks`).
        """
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                "DistributedRun.start needs an initialised process group: call "
                "torch.distributed.init_process_group() first (torchrun sets its environment)"
            )
        cells = CellMap.of(model, strategy)
        driver: DriverSession | None = None

        def open_driver() -> _Opening:
            nonlocal driver
            index = ResumeIndex.open(run_dir)  # the log, read once for the whole resume
            found = _resume_point(index, resume)
            driver = DriverSession.start(
                run_dir,
                buffer_size=buffer_size,
                resume_from=found.ref if found is not None else None,
                config={**(config or {}), "strategy": cells.strategy},
                dataset_size=dataset_size,
                deterministic_order=deterministic_order,
                options=options,
                index=index,
            )
            return _Opening(
                driver.incarnation, driver.first_step, found, list(driver.resume_stale_ids)
            )

        opening = _decide(open_driver)
        hooks = TrainerHooks.attach(
            run_dir,
            opening.incarnation,
            cell=cells.cell,
            rank=cells.rank,
            model=model,
            optimizer=optimizer,
            faults=faults,
            options=options,
            stateful=stateful,
        )
        places = _all_gather((cells.cell, cells.rank))
        if len(set(places)) != len(places):
            raise UsageError(f"two processes map to the same (cell, rank): {places}")
        return cls(hooks, cells, places, opening, driver)

    @property
    def is_driver(self) -> bool:
        return self.driver is not None

    # -- per step ------------------------------------------------------------------------

    def allocate(
        self, step: int, attempt: int, sample_indices: Sequence[int] | np.ndarray | torch.Tensor
    ) -> WitnessInfo:
        """Witness ids for the samples this rank loaded; every rank calls it each attempt.

        The indices of every rank are gathered on rank 0 and allocated there in global
        rank order (one ``WitnessAllocated`` for the global batch); this rank gets the ids
        of its own samples, in the order given, and the attempt's stale ids.
        """
        mine = _indices(sample_indices)
        gathered = _gather(mine)

        def allocate_global() -> tuple[WitnessInfo, list[int]]:
            assert self.driver is not None and gathered is not None
            info = self.driver.allocate(step, attempt, np.concatenate(gathered))
            return info, np.cumsum([0, *(len(g) for g in gathered)]).tolist()

        info, starts = _decide(allocate_global)
        start, end = starts[self.global_rank], starts[self.global_rank + 1]
        return WitnessInfo(info.witness_ids[start:end], info.stale_ids)

    def end_attempt(self, step: int, attempt: int, outcome: RankOutcome | str = "normal") -> bool:
        """Report this rank's outcome; the driver applies its policy. True: move on.

        ``discarded_should_retry`` on any rank retries the step (allocate again with
        ``attempt + 1``); a rank that discarded must not call ``after_optimizer_step``.
        """
        outcomes = _gather(RankOutcome(outcome))

        def decide() -> bool:
            assert self.driver is not None and outcomes is not None
            return self.driver.end_attempt(step, attempt, self._cell_outcomes(outcomes))

        accepted = _decide(decide)
        if accepted:
            self._accepted[step] = attempt
        return accepted

    def _cell_outcomes(self, outcomes: list[RankOutcome]) -> dict[int, CellOutcome]:
        by_cell: dict[int, dict[int, RankOutcome]] = {}
        for (cell, rank), outcome in zip(self.places, outcomes, strict=True):
            by_cell.setdefault(cell, {})[rank] = outcome
        return {
            cell: CellOutcome(ranks=[ranks[r] for r in sorted(ranks)])
            for cell, ranks in sorted(by_cell.items())
        }

    # -- checkpoints ---------------------------------------------------------------------

    def save_checkpoint(
        self,
        path: str | os.PathLike[str],
        iteration: int,
        extra: dict[str, Any] | None = None,
        *,
        how: Layout | None = None,
    ) -> None:
        """Save checkpoint ``iteration`` (after its step was accepted); every rank calls it.

        ``how`` (default: ``local`` when ``path`` holds ``{rank}``, else ``full``):
        ``full``: global rank 0 writes the full state (gathered from the shards of a
        sharded model) and every other rank logs the checksums of what it holds, so each
        rank that loads the file later is compared with a save of its own rank;
        ``local``: every process writes its own file (``{rank}`` = its global rank);
        ``dcp``: ``torch.distributed.checkpoint`` into the directory ``path``, every
        rank its shards. Rank 0 then marks the checkpoint complete.
        """
        template = str(path)
        layout = how or _layout_of(template, dcp_dir=False)
        with self.hooks.step(iteration, self._accepted.get(iteration, 0)):
            self.hooks.save_checkpoint(self._path(template), iteration, extra, how=layout)
        dist.barrier()  # every rank's part and snapshot are durable
        _decide(lambda: self.driver.record_checkpoint(iteration, path=template))  # type: ignore[union-attr]

    def load_checkpoint(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """Load the resumed checkpoint (its logged path, or ``path``) and zero the resume
        stale slots; logs ``after_load`` checksums; every rank calls it. The layout is
        the save's: ``{rank}`` in the path is ``local``, a directory ``dcp``, a file
        ``full``. Returns the saved ``extra``."""
        if self.resume is None:
            raise UsageError("this incarnation resumes from no checkpoint: nothing to load")
        template = str(path if path is not None else self.resume.path)
        target = self._path(template)
        with self.hooks.step(self.first_step, 0):
            return self.hooks.load_checkpoint(
                target,
                checkpoint=self.resume.ref,
                resume_stale_ids=self.resume_stale_ids,
                how=_layout_of(template, dcp_dir=target.is_dir()),
            )["extra"]

    def _path(self, template: str) -> Path:
        return Path(template.replace(RANK_FIELD, str(self.global_rank)))

    def finish(self, status: RunStatus = RunStatus.COMPLETED) -> None:
        """Close this rank's writers; rank 0 logs the end of the incarnation."""
        self.hooks.close()
        dist.barrier()
        _decide(lambda: self.driver.finish(status))  # type: ignore[union-attr]


def _layout_of(template: str, *, dcp_dir: bool) -> Layout:
    if RANK_FIELD in template:
        return "local"
    return "dcp" if dcp_dir else "full"


def _resume_point(index: ResumeIndex, resume: Resume) -> CompleteCheckpoint | None:
    if resume is None:
        return None
    if resume == "latest":
        return index.latest_checkpoint()
    found = index.complete_at(resume)
    if found is None:
        raise UsageError(f"{index.run_dir}: no complete checkpoint at iteration {resume}")
    return found


def _indices(values: Sequence[int] | np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _decide(decide: Callable[[], T]) -> T:
    """Run ``decide`` on rank 0 (the driver's rank) and give every rank its result, or
    raise its error on every rank."""
    here = dist.get_rank() == 0
    answer = _Answer()
    if here:
        try:
            answer = _Answer(value=decide())
        except Exception as exc:
            answer = _Answer(error=f"{type(exc).__name__}: {exc}")
            _broadcast(answer)
            raise
    answer = _broadcast(answer)
    if answer.error is not None:
        raise RuntimeError(f"the ftaudit driver on rank 0 failed: {answer.error}")
    return answer.value


def _broadcast(value: T) -> T:
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _gather(value: T) -> list[T] | None:
    """Every rank's ``value`` on rank 0 (None elsewhere)."""
    out: list[T] | None = [None] * dist.get_world_size() if dist.get_rank() == 0 else None  # type: ignore[list-item]
    dist.gather_object(value, out, dst=0)
    return out


def _all_gather(value: T) -> list[T]:
    out: list[T] = [None] * dist.get_world_size()  # type: ignore[list-item]
    dist.all_gather_object(out, value)
    return out
