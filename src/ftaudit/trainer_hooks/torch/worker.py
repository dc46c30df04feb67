"""The trainer side of the hooks: one object per trainer rank, a few calls per step.

It attaches to the incarnation the driver started, writes as ``Trainer(cell, rank)``,
and owns the evidence of that rank: witness snapshots and clearing after each committed
optimizer step, the witness gradient and step counters that count applications, the
trainable-parameter manifest, per-sample advantage summaries, metrics, checksums of the
whole state (weights, optimizer, param-group scalars, registered stateful objects),
restore evidence, and checkpoints that carry all of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import torch
from torch import nn

from ftaudit.dataset.fingerprint import fingerprint, fingerprint_rows
from ftaudit.errors import UsageError
from ftaudit.eventlog.context import StepAttempt, current, step_context
from ftaudit.eventlog.events import (
    CheckpointRef,
    ChecksumWhen,
    DataOrder,
    LoaderState,
    Metric,
    ParameterManifest,
    SampleAdvantageSummary,
    SampleFingerprints,
    StateAdopted,
    StepApplied,
    WitnessCleared,
    WitnessGradient,
    WitnessSnapshot,
)
from ftaudit.eventlog.identity import Trainer
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.run import RunLog
from ftaudit.eventlog.writer import EventWriter, WriterOptions
from ftaudit.trainer_hooks.faults import FaultInjector, FaultSchedule
from ftaudit.trainer_hooks.torch.checksums import state_hashes
from ftaudit.trainer_hooks.torch.clearing import MasterParams, WitnessClearer, as_runs
from ftaudit.trainer_hooks.torch.counters import gradient_rows, step_counters
from ftaudit.trainer_hooks.torch.manifest import parameter_manifest
from ftaudit.trainer_hooks.torch.state_io import Layout, read_state, write_state
from ftaudit.trainer_hooks.torch.state_scalars import Stateful, group_hashes, stateful_hashes
from ftaudit.trainer_hooks.torch.witness import WitnessSet, find_witnesses

WHOLE_TENSOR_POINTS = frozenset(
    {ChecksumWhen.AT_SAVE, ChecksumWhen.AFTER_LOAD, ChecksumWhen.AFTER_HEAL}
)
"""Checksum points compared across layouts (a restore may reshard): whole-tensor digests."""

Hasher = Callable[[bool], dict[str, str]]
"""An integration's state hashes (``name -> hash``); called with ``whole`` true at the
:data:`WHOLE_TENSOR_POINTS`, where it adds the ``@whole`` digests of the tensors it can
digest whole (``state_hashes(..., whole=whole)`` does for plain and DTensor state)."""


class Clearer(Protocol):
    """Snapshots and clears witness rows: :class:`WitnessClearer`, or a framework's own
    (:class:`ftaudit.trainer_hooks.megatron.MegatronWitnessClearer`)."""

    def snapshot(self) -> dict[str, IntRuns]: ...

    def zero(self, stale_ids: IntRuns | Sequence[int] | np.ndarray) -> None: ...


class TokenContext(Protocol):
    """Gives the per-token witness ids to forwards run inside (:meth:`WitnessSet.tokens`)."""

    def tokens(self, ids: torch.Tensor) -> AbstractContextManager[torch.Tensor]: ...


class TrainerHooks:
    """The hooks of one trainer rank (``cell``, ``rank`` within the cell).

    Typical step::

        with hooks.step(step, attempt):
            with hooks.batch(token_ids):
                loss = model(x).loss
                loss.backward()
            hooks.before_optimizer_step()       # after the all-reduce: the witness gradient
            optimizer.step()
            scheduler.step()
            hooks.after_optimizer_step(info.stale_ids)

    ``stateful`` registers objects whose ``state_dict()`` is part of the training state
    (LR scheduler, grad scaler, sampler, data loader): they are hashed with the weights,
    saved and loaded with the checkpoint, and a scheduler's ``last_epoch`` is counted.
    """

    def __init__(
        self,
        run: RunLog,
        *,
        cell: int,
        rank: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        witnesses: WitnessSet | TokenContext | None = None,
        role: Literal["actor", "critic"] = "actor",
        master_params: MasterParams | None = None,
        faults: FaultSchedule | None = None,
        clearer: Clearer | None = None,
        hasher: Hasher | None = None,
        replica_local: Sequence[str] = (),
        stateful: Mapping[str, Stateful] | None = None,
    ) -> None:
        """``clearer`` and ``hasher`` replace the plain-PyTorch witness clearing and state
        hashes for frameworks whose optimizers keep their own copies (Megatron-core), or
        that hash state of their own (a framework's RNG, scheduler, data position).
        ``hasher(whole)`` is called with ``whole`` true at a save, load or heal, where it
        adds the layout-independent ``@whole`` digests it can (:data:`Hasher`).

        ``replica_local`` names state tensors (keys of :meth:`hashes` without a layout
        tag, e.g. ``buffer/bn.running_mean``) that differ between cells by design: their
        shards and whole-tensor digests go with them. Each checksum
        declares them, so FT006 leaves them out of the cross-replica comparison and still
        compares them at save/load and heal."""
        self.run = run
        self.identity = Trainer(role=role, cell_index=cell, rank_within_cell=rank)
        self.writer: EventWriter = run.writer(self.identity)
        self.model = model
        self.optimizer = optimizer
        self.master_params = dict(master_params or {})
        self.witnesses: WitnessSet | TokenContext
        self.clearer: Clearer
        if clearer is not None:
            if witnesses is None:
                raise UsageError("with a clearer, give its witnesses too")
            self.witnesses, self.clearer = witnesses, clearer
        else:
            self.witnesses = witnesses if witnesses is not None else find_witnesses(model)
            if not isinstance(self.witnesses, WitnessSet):
                raise TypeError("these witnesses need their own clearer: pass clearer=")
            self.clearer = WitnessClearer(self.witnesses, optimizer, self.master_params)
        self.hasher = hasher
        self.replica_local = tuple(replica_local)
        self.stateful: dict[str, Stateful] = dict(stateful or {})
        self._manifest: str | None = None
        """The digest of the last logged parameter manifest."""
        self._declared_change = ""
        self.faults = FaultInjector(
            faults or FaultSchedule(), self.writer, target="trainer", cell=cell, rank=rank
        )

    @classmethod
    def attach(
        cls,
        run_dir: str | os.PathLike[str],
        incarnation: int,
        *,
        cell: int,
        rank: int,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        witnesses: WitnessSet | TokenContext | None = None,
        role: Literal["actor", "critic"] = "actor",
        master_params: MasterParams | None = None,
        faults: FaultSchedule | None = None,
        options: WriterOptions | None = None,
        clearer: Clearer | None = None,
        hasher: Hasher | None = None,
        replica_local: Sequence[str] = (),
        stateful: Mapping[str, Stateful] | None = None,
    ) -> TrainerHooks:
        """Join incarnation ``incarnation`` of the run at ``run_dir`` from a worker process."""
        return cls(
            RunLog.attach(run_dir, incarnation, options),
            cell=cell,
            rank=rank,
            model=model,
            optimizer=optimizer,
            witnesses=witnesses,
            role=role,
            master_params=master_params,
            faults=faults,
            clearer=clearer,
            hasher=hasher,
            replica_local=replica_local,
            stateful=stateful,
        )

    @property
    def cell(self) -> int:
        return self.identity.cell_index

    @property
    def rank(self) -> int:
        return self.identity.rank_within_cell

    # -- per step ------------------------------------------------------------------------

    @contextmanager
    def step(self, step: int, attempt: int = 0) -> Iterator[StepAttempt]:
        """Events logged inside belong to this step and attempt."""
        with step_context(step, attempt) as value:
            yield value

    def batch(self, token_ids: torch.Tensor) -> Any:
        """The per-token witness ids of the batch that forwards inside run on."""
        return self.witnesses.tokens(token_ids)

    def maybe_fault(self, at: str = "step") -> None:
        """Fire the fault scheduled for this rank at this point of the current step, if any."""
        ctx = self._require_step("maybe_fault")
        self.faults.maybe_fire(ctx.step, ctx.attempt, at)  # type: ignore[arg-type]

    def before_optimizer_step(self) -> dict[str, IntRuns]:
        """Log each witness's gradient rows: call it after the all-reduce, before the step.

        The gradient must hold exactly this attempt's ids (FT011): a row of an earlier
        attempt is a gradient that was never cleared and is about to be applied again.
        """
        self._require_step("before_optimizer_step")
        if not isinstance(self.witnesses, WitnessSet):
            raise TypeError("the witness gradient needs the plain-PyTorch witnesses")
        rows = gradient_rows(self.witnesses)
        for instance, nonzero in rows.items():
            # as field values: the hot events skip building a model (eventlog.hot)
            self.writer.log_fields(WitnessGradient, self.cell, self.rank, instance, nonzero)
        return rows

    def after_optimizer_step(
        self,
        stale_ids: IntRuns | Sequence[int] | np.ndarray,
        *,
        checksum: bool = False,
        flush: bool = True,
    ) -> dict[str, IntRuns]:
        """After a committed optimizer step: snapshot nonzero rows, log them, zero the stale.

        ``stale_ids`` are the stale ids of the attempt's allocation
        (:attr:`ftaudit.trainer_hooks.WitnessInfo.stale_ids`). Also logs the step counters
        (the optimizer's step count, registered schedulers' ``last_epoch``) and, when it
        changed, the trainable-parameter manifest: call it after everything the step
        updates (optimizer, scheduler, scaler). Flushes by default, so the evidence is
        durable before this rank reports its outcome to the driver.
        """
        self._require_step("after_optimizer_step")
        stale = as_runs(stale_ids)
        snapshot = self.clearer.snapshot()
        for instance, nonzero in snapshot.items():
            self.writer.log_fields(WitnessSnapshot, self.cell, instance, nonzero, stale)
        self.clearer.zero(stale)
        counters = step_counters(self.optimizer, self.stateful)
        self.writer.log_fields(StepApplied, self.cell, self.rank, counters)
        self.log_manifest()
        if checksum:
            self.log_checksums(ChecksumWhen.AFTER_STEP)
        if flush:
            self.writer.flush()
        return snapshot

    def after_discard(
        self, stale_ids: IntRuns | Sequence[int] | np.ndarray, *, flush: bool = True
    ) -> None:
        """After a discarded attempt (no optimizer step): zero its stale slots and log it.

        Call it on every rank that discarded, with the attempt's
        :attr:`~ftaudit.trainer_hooks.WitnessInfo.stale_ids`, before the retry trains.
        The retry's ids then start from cleared rows, so a step may be retried any number
        of times (each attempt within ``B - keep`` ids); without it, the attempts of one
        step together must stay within ``B - keep`` (FT003 reports ``over_budget``). The
        stale slots hold only evidence that no later snapshot checks.
        """
        self._require_step("after_discard")
        stale = as_runs(stale_ids)
        self.clearer.zero(stale)
        self.writer.log_fields(WitnessCleared, self.cell, stale)
        if flush:
            self.writer.flush()

    def log_fingerprints(
        self,
        sample_indices: Sequence[int] | np.ndarray | torch.Tensor,
        inputs: torch.Tensor | Sequence[Any],
        *,
        items: Sequence[int] | np.ndarray | torch.Tensor | None = None,
    ) -> np.ndarray:
        """Fingerprint what the model receives, one sample per row; log it; return them.

        ``inputs`` is the batch tensor the step feeds the model (row ``k`` is sample
        ``sample_indices[k]``, its stream position), or one tensor per sample for ragged
        batches. ``items`` are the dataset items the loader read, where it knows them.
        Each row digests like :func:`ftaudit.dataset.fingerprint` of the dataset item it
        was stacked from, so rule FT008 can compare it with the run's manifest.
        """
        self._require_step("log_fingerprints")
        if isinstance(inputs, torch.Tensor):
            fps = fingerprint_rows(inputs)
        else:
            fps = np.asarray([fingerprint(x) for x in inputs], dtype=np.int64)
        self.writer.log(
            SampleFingerprints(
                cell=self.cell,
                sample_indices=IntRuns.from_sequence(_as_list(sample_indices)),
                fingerprints=fps.tolist(),
                items=[] if items is None else [int(i) for i in _as_list(items)],
            )
        )
        return fps

    def log_data(self, event: DataOrder | LoaderState) -> None:
        """Log the loader's epoch order, or its state at a save or after a resume."""
        self.writer.log(event)

    def log_manifest(self) -> bool:
        """Log the trainable-parameter manifest if it changed since the last one logged.

        Returns whether it was logged. A change is a violation (FT012) unless declared
        first with :meth:`declare_parameter_change`.
        """
        manifest = parameter_manifest(self.model, self.optimizer)
        digest = manifest.digest
        if digest == self._manifest:
            return False
        self.writer.log(
            ParameterManifest(
                cell=self.cell,
                rank=self.rank,
                digest=digest,
                names=list(manifest.names),
                shapes=[list(s) for s in manifest.shapes],
                dtypes=list(manifest.dtypes),
                requires_grad=list(manifest.requires_grad),
                groups=list(manifest.groups),
                declared_change=self._declared_change,
            )
        )
        self._manifest, self._declared_change = digest, ""
        return True

    def declare_parameter_change(self, reason: str) -> None:
        """The next manifest change is intended (a layer unfrozen on schedule): say why."""
        if not reason:
            raise UsageError("say why the trainable parameters change")
        self._declared_change = reason

    def adopt_live_state(
        self,
        reason: str,
        *,
        checkpoint: CheckpointRef | None = None,
        source_cell: int | None = None,
    ) -> None:
        """Restore evidence for a rank that keeps its live state at a resume or heal.

        Without a load (``after_load``), a heal (``after_heal``) or this, a rank of a
        resumed incarnation or a healed cell is a violation (FT009): it may be training
        on weights it never reloaded.
        """
        self.writer.log(
            StateAdopted(
                cell=self.cell,
                rank=self.rank,
                reason=reason,
                checkpoint=checkpoint,
                heal_source=source_cell,
            )
        )

    def log_metrics(self, values: Mapping[str, float]) -> None:
        """Metrics of this rank for the current step (NaN and inf are kept)."""
        self.writer.log_fields(Metric, {k: float(v) for k, v in values.items()})

    def log_sample_advantages(
        self,
        witness_ids: Sequence[int] | torch.Tensor,
        token_counts: Sequence[int] | torch.Tensor,
        all_zero: Sequence[bool] | torch.Tensor,
        *,
        pure_advantage_loss: bool,
        flush: bool = True,
    ) -> None:
        """Per local sample: witness id, local token count, whether every advantage was zero.

        Call it before the gradient exchange; it flushes by default, so the evidence is
        durable even if this rank dies right after the exchange (its peers then commit
        its shard, and without the summary its zero-gradient samples would read as lost).

        A sample whose gradient is exactly zero legitimately leaves no trace in the
        witness; this is what lets the verifier excuse it: one with no loss tokens (summed
        over the ranks holding its tokens) always, one with all-zero advantage only when
        ``pure_advantage_loss`` declares that every loss term scales with the advantage.
        With a KL penalty or an entropy bonus, declare False: such samples still get
        gradient and are expected like any other.
        """
        self.writer.log(
            SampleAdvantageSummary(
                cell=self.cell,
                witness_ids=[int(x) for x in _as_list(witness_ids)],
                token_counts=[int(x) for x in _as_list(token_counts)],
                all_zero=[bool(x) for x in _as_list(all_zero)],
                pure_advantage_loss=pure_advantage_loss,
            )
        )
        if flush:
            self.writer.flush()

    def log_advantages(
        self,
        witness_ids: Sequence[int] | torch.Tensor,
        advantages: torch.Tensor,
        loss_mask: torch.Tensor | None = None,
        *,
        pure_advantage_loss: bool,
        flush: bool = True,
    ) -> None:
        """:meth:`log_sample_advantages` from per-token tensors [batch, seq] of this rank."""
        counts, all_zero = advantage_summary(advantages, loss_mask)
        self.log_sample_advantages(
            witness_ids, counts, all_zero, pure_advantage_loss=pure_advantage_loss, flush=flush
        )

    # -- checksums and checkpoints -------------------------------------------------------

    def hashes(self, when: ChecksumWhen | str | None = None) -> dict[str, str]:
        """Hashes of this rank's whole state: parameters, buffers, optimizer state,
        param-group scalars and the registered stateful objects.

        At a save, load or heal, tensors sharded by rows (FSDP2) also get a
        layout-independent digest of the whole tensor (a collective: every rank of the
        shard group logs these checksums).
        """
        whole = when is not None and ChecksumWhen(when) in WHOLE_TENSOR_POINTS
        if self.hasher is not None:
            return {**self.hasher(whole), **stateful_hashes(self.stateful)}
        return {
            **state_hashes(
                self.model, self.optimizer, master_params=self.master_params, whole=whole
            ),
            **group_hashes(self.optimizer),
            **stateful_hashes(self.stateful),
        }

    def log_checksums(
        self,
        when: ChecksumWhen | str,
        *,
        checkpoint: CheckpointRef | None = None,
        source_cell: int | None = None,
        captured: Mapping[str, str] | None = None,
    ) -> dict[str, str]:
        """Log a ``TrainerWeightChecksum`` of this rank's state; returns the hashes.

        ``captured`` replaces some hashes by values taken earlier, for state that moved
        on since it was loaded (a framework's RNG, consumed before the first step).
        """
        from ftaudit.eventlog.events import TrainerWeightChecksum, tensor_of

        hashes = {**self.hashes(when), **(captured or {})}
        self.writer.log(
            TrainerWeightChecksum(
                when=ChecksumWhen(when),
                cell=self.cell,
                rank=self.rank,
                hashes=hashes,
                checkpoint=checkpoint,
                heal_source=source_cell,
                replica_local=sorted(set(self.replica_local) & {tensor_of(n) for n in hashes}),
            )
        )
        return hashes

    def save_checkpoint(
        self,
        path: str | os.PathLike[str],
        iteration: int,
        extra: Mapping[str, Any] | None = None,
        *,
        how: Layout = "local",
    ) -> Path:
        """Save model (witness rows included), optimizer state and the registered stateful
        objects, then log it.

        ``how`` (see :mod:`ftaudit.trainer_hooks.torch.state_io`): ``local`` writes this
        process's ``state_dict`` atomically; ``full`` (global rank 0 writes the full
        state) and ``dcp`` (``torch.distributed.checkpoint``, ``path`` a directory) are
        collectives: every rank calls them. Logs the ``at_save`` checksums on every rank,
        and ``CheckpointSaved`` on each rank that wrote a part; the driver marks the
        checkpoint complete once every rank has saved.
        """
        target = Path(path)
        wrote = write_state(
            how,
            target,
            self.model,
            self.optimizer,
            self.master_params,
            self.stateful,
            iteration,
            dict(extra or {}),
        )
        self.log_checksums(
            ChecksumWhen.AT_SAVE,
            checkpoint=CheckpointRef(iteration=iteration, incarnation=self.run.incarnation),
        )
        if wrote:
            self.run.record_checkpoint(iteration, path=str(target), source=self.identity)
        else:
            self.writer.flush()
        return target

    def load_checkpoint(
        self,
        path: str | os.PathLike[str],
        *,
        checkpoint: CheckpointRef | None = None,
        resume_stale_ids: IntRuns | Sequence[int] | None = None,
        how: Layout = "local",
    ) -> dict[str, Any]:
        """Load a checkpoint saved by :meth:`save_checkpoint`; log ``after_load`` checksums.

        The registered stateful objects are restored too; the checksums are this rank's
        restore evidence (FT009) and compare with what was saved (FT006).

        ``checkpoint`` names it in the log (the driver's ``resume_from``), and
        ``resume_stale_ids`` are the driver's :attr:`DriverSession.resume_stale_ids`,
        zeroed right after loading (the checksums are taken before, so they compare
        with what was saved). ``how`` as it was saved (``full`` and ``dcp`` are
        collectives). Returns ``{"iteration": ..., "extra": {...}}``.
        """
        loaded = read_state(
            how, Path(path), self.model, self.optimizer, self.master_params, self.stateful
        )
        self.log_checksums(ChecksumWhen.AFTER_LOAD, checkpoint=checkpoint)
        if resume_stale_ids is not None:
            self.clear_at_resume(resume_stale_ids)
        return loaded

    def clear_at_resume(self, stale_ids: IntRuns | Sequence[int]) -> None:
        """Zero the driver's resume stale slots in the restored parameters and moments.

        The ring slots the next allocations use were cleared on the abandoned timeline,
        not in the restored weights; zeroing them here keeps the ring exact.
        """
        self.clearer.zero(stale_ids)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        """Flush and close this rank's writers."""
        self.run.close()

    def _require_step(self, what: str) -> StepAttempt:
        ctx = current()
        if ctx.step is None or ctx.attempt is None:
            raise RuntimeError(f"{what} must run inside hooks.step(step, attempt)")
        return ctx


def advantage_summary(
    advantages: torch.Tensor, loss_mask: torch.Tensor | None = None
) -> tuple[list[int], list[bool]]:
    """Per sample (row): the number of loss tokens, and whether all their advantages are 0."""
    adv = advantages.detach()
    mask = torch.ones_like(adv, dtype=torch.bool) if loss_mask is None else loss_mask.bool()
    counts = mask.sum(dim=-1)
    zero = ((adv == 0) | ~mask).all(dim=-1)
    return counts.cpu().tolist(), zero.cpu().tolist()


def _as_list(values: Sequence[Any] | np.ndarray | torch.Tensor) -> list[Any]:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().reshape(-1).tolist()
    if isinstance(values, np.ndarray):
        return values.reshape(-1).tolist()
    return list(values)
