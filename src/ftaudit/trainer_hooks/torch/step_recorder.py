"""One process of a data-parallel job, recorded through a training framework's step hooks.

The framework callbacks (:mod:`ftaudit.trainer_hooks.hf`, :mod:`ftaudit.trainer_hooks.lightning`)
translate their framework's hooks into the few calls of :class:`StepRecorder`. The job is
one cell; its ranks are the ``torch.distributed`` ranks (one process without it). Global
rank 0 is also the driver: it starts each incarnation, allocates the witness ids of every
rank's samples, and logs the step ends and the complete checkpoints. The ranks talk over
their own gloo group, so the collectives here never touch the job's (NCCL) gradients.

Frameworks have no retries: every step has the single attempt 0, and a restart from a
checkpoint is a new incarnation.

Sample indices are stream positions (SPEC §1): a consumed-samples counter. Each
micro-batch of every rank together is the next block of positions, rank 0's samples
first (:func:`ftaudit.trainer_hooks.counter_positions`); the counter is saved with each
checkpoint and a resume continues from the checkpoint's count. Which dataset item a
position reads is declared per epoch (``data_order``) and claimed per sample with the
fingerprint of what the model received (``sample_fingerprints``), for rule FT008.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ftaudit.dataset.manifest import DatasetManifest
from ftaudit.errors import UsageError
from ftaudit.eventlog.context import step_context
from ftaudit.eventlog.events import CheckpointRef, ChecksumWhen, DataOrder, RunStatus
from ftaudit.eventlog.writer import WriterOptions
from ftaudit.trainer_hooks.allocator import WitnessInfo, max_ids_per_step, min_buffer_size
from ftaudit.trainer_hooks.driver import DriverSession, ranks
from ftaudit.trainer_hooks.stream import counter_positions
from ftaudit.trainer_hooks.torch.checksums import state_hashes
from ftaudit.trainer_hooks.torch.indexed_data import batch_items
from ftaudit.trainer_hooks.torch.witness import (
    WITNESS_MODULE,
    WitnessSet,
    find_witnesses,
    install_witnesses,
)
from ftaudit.trainer_hooks.torch.worker import TrainerHooks

ATTEMPT = 0
"""Frameworks do not retry a step: each step has one attempt."""


@dataclass(frozen=True)
class RecorderSettings:
    """What a framework callback is given: where and how its run is recorded."""

    run_dir: str | os.PathLike[str]
    buffer_size: int
    layers: str | Sequence[str] | None = None
    """The layer stack's path (None: the largest ``ModuleList``)."""
    dataset_size: int | None = None
    """The dataset's N (None: the train loader's dataset's length)."""
    deterministic_order: bool | None = None
    """Whether the data order is fixed (a hole or a changed order is then an error)."""
    input_key: str | None = "input_ids"
    """The input whose rows are fingerprinted per sample (None: none, FT008 cannot check
    the items read)."""
    data_manifest: DatasetManifest | str | os.PathLike[str] | None = None
    """The training dataset's manifest (or its file): FT008 checks what was fed against it."""
    options: WriterOptions | None = None


class FrameworkCallback:
    """What every framework callback (Hugging Face, Lightning) is made with: its recorder's
    settings and how a batch names its samples; it makes its :class:`StepRecorder` when the
    framework hands it the model."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        buffer_size: int,
        layers: str | Sequence[str] | None = None,
        dataset_size: int | None = None,
        deterministic_order: bool | None = None,
        sample_items: Callable[[Any], list[int] | None] = batch_items,
        input_key: str | None = "input_ids",
        data_manifest: DatasetManifest | str | os.PathLike[str] | None = None,
        options: WriterOptions | None = None,
    ) -> None:
        """``buffer_size`` must admit one step's samples on all ranks:
        ``B >= min_buffer_size(per_device_batch * grad_accum * world_size)``.
        ``layers``: the layer stack's path (default: the largest ``ModuleList``).
        ``dataset_size``: the dataset's N (default: the train dataset's length).
        ``deterministic_order``: declare whether the data order is fixed (a hole in
        the stream or a changed order is then an error, not a warning).
        ``sample_items``: reads a batch's dataset indices (default: those
        :class:`IndexedDataset` adds).
        ``input_key``: the batch tensor (forward argument) whose rows are fingerprinted
        per sample (None: no fingerprints, FT008 then cannot check the items read).
        ``data_manifest``: the train dataset's manifest (``build_manifest(ds,
        field="input_ids")`` or an ``ftaudit manifest`` file): FT008 then checks every fed
        sample's content against its item, not only agreement."""
        self.settings = RecorderSettings(
            run_dir,
            buffer_size,
            layers=layers,
            dataset_size=dataset_size,
            deterministic_order=deterministic_order,
            input_key=input_key,
            data_manifest=data_manifest,
            options=options,
        )
        self.sample_items = sample_items
        self.recorder: StepRecorder | None = None


def resume_point(finished_steps: int, consumed: int | None) -> tuple[int | None, int]:
    """``(resume_iteration, consumed)`` of a framework run that has ``finished_steps``.

    Frameworks count finished optimizer steps, and the ftaudit step of an optimizer step
    is that count before it: a run restored at ``G > 0`` finished steps resumed from
    checkpoint iteration ``G - 1`` and continues the stream at the ``consumed`` positions
    its checkpoint saved (None: the checkpoint holds none).
    """
    if finished_steps <= 0:
        return None, 0
    if consumed is None:
        raise UsageError(
            "FtauditCallback: the checkpoint holds no ftaudit stream position (it was not "
            "saved with FtauditCallback): cannot continue the stream"
        )
    return finished_steps - 1, consumed


def inner_optimizer(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The torch optimizer inside a framework's wrapper (accelerate's, Lightning's)."""
    while isinstance(getattr(optimizer, "optimizer", None), torch.optim.Optimizer):
        optimizer = optimizer.optimizer
    return optimizer


class StepRecorder:
    """The ftaudit side of one process of a framework-driven DDP job.

    Call order: :meth:`start` once the model and optimizer exist (and, on a resume, are
    loaded); :meth:`after_load` before the first step; per optimizer step, for each
    micro-batch :meth:`allocate` and its forward and backward inside :meth:`batch`, then
    :meth:`after_optimizer_step` and :meth:`end_step`; :meth:`log_save` when a checkpoint
    is taken and :meth:`checkpoint_durable` once it is written; :meth:`finish`. Every
    call marked *collective* must be made by every rank in the same order.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        buffer_size: int,
        witnesses: WitnessSet,
        cell: int = 0,
        deterministic_order: bool | None = None,
        data_manifest: DatasetManifest | str | os.PathLike[str] | None = None,
        options: WriterOptions | None = None,
    ) -> None:
        """``data_manifest``: the training dataset's manifest (``ftaudit.dataset``), which
        rank 0 declares in every incarnation so FT008 checks what was fed against it."""
        self.run_dir = run_dir
        self.data_manifest = data_manifest
        self.buffer_size = buffer_size
        self.witnesses = witnesses
        self.cell = cell
        self.dataset_size: int | None = None
        """The dataset's size N, known from :meth:`start`."""
        self.consumed = 0
        """Stream positions consumed so far on all ranks: the next micro-batch's first."""
        self.deterministic_order = deterministic_order
        self.options = options
        self.driver: DriverSession | None = None
        self.hooks: TrainerHooks | None = None
        self.resume_stale_ids: list[int] = []
        self.resume_from: CheckpointRef | None = None
        self._group: Any = None
        self._last: WitnessInfo | None = None
        self._step_ids = (-1, 0)  # (step, ids allocated to it so far)
        self._pending_load = False
        self._batch = ExitStack()  # the witness ids of the micro-batch in flight

    @classmethod
    def for_model(cls, model: nn.Module, settings: RecorderSettings) -> StepRecorder:
        """A recorder for ``model``, its witnesses installed (once) on its layer stack."""
        return cls(
            settings.run_dir,
            buffer_size=settings.buffer_size,
            witnesses=install_for_framework(model, settings.buffer_size, settings.layers),
            deterministic_order=settings.deterministic_order,
            data_manifest=settings.data_manifest,
            options=settings.options,
        )

    # -- processes -----------------------------------------------------------------------

    @property
    def distributed(self) -> bool:
        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1

    @property
    def rank(self) -> int:
        return dist.get_rank() if self.distributed else 0

    @property
    def world_size(self) -> int:
        return dist.get_world_size() if self.distributed else 1

    @property
    def is_driver(self) -> bool:
        return self.rank == 0

    @property
    def started(self) -> bool:
        return self.hooks is not None

    def _broadcast(self, value: Any) -> Any:
        if not self.distributed:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def gather(self, value: Any) -> list[Any]:
        """*Collective.* Every rank's ``value``, in rank order (over the gloo group)."""
        if not self.distributed:
            return [value]
        if self._group is None:
            self._group = dist.new_group(backend="gloo")
        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, value, group=self._group)
        return out

    # -- incarnation ---------------------------------------------------------------------

    def start(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        *,
        resume_iteration: int | None,
        extra_hashes: Callable[[], dict[str, str]],
        dataset_size: int,
        consumed: int = 0,
        config: Mapping[str, object] | None = None,
    ) -> None:
        """*Collective.* Open this incarnation (rank 0) and attach every rank to it.

        ``resume_iteration`` is the ftaudit step of the checkpoint the framework loaded
        (None for a fresh start). ``extra_hashes`` gives the hashes of the state outside
        model and optimizer (RNG, scheduler, data position) at save and at load.
        ``dataset_size`` is the dataset's N; ``consumed`` the stream positions the loaded
        checkpoint had consumed (:attr:`consumed` when it was saved; 0 for a fresh start);
        ``config`` goes into ``run_started``.
        """
        self.dataset_size = dataset_size
        self.consumed = consumed
        self.gather(None)  # every rank is here (and the gloo group exists)
        header: tuple[int, list[int], CheckpointRef | None] | None = None
        if self.is_driver:
            self.driver = DriverSession.start(
                self.run_dir,
                buffer_size=self.buffer_size,
                resume_from=resume_iteration,
                config=dict(config or {}),
                dataset_size=dataset_size,
                deterministic_order=self.deterministic_order,
                options=self.options,
            )
            if self.data_manifest is not None:
                self.driver.declare_manifest(self.data_manifest)
            header = (
                self.driver.incarnation,
                list(self.driver.resume_stale_ids),
                self.driver.resume_from,
            )
        incarnation, self.resume_stale_ids, self.resume_from = self._broadcast(header)
        opt = inner_optimizer(optimizer)
        self.hooks = TrainerHooks.attach(
            self.run_dir,
            incarnation,
            cell=self.cell,
            rank=self.rank,
            model=model,
            optimizer=opt,
            witnesses=self.witnesses,
            options=self.options,
            hasher=lambda whole: {**state_hashes(model, opt, whole=whole), **extra_hashes()},
        )
        self._pending_load = self.resume_from is not None
        self.first_step = self.resume_from.iteration + 1 if self.resume_from is not None else 0

    @property
    def incarnation(self) -> int:
        return self._require().run.incarnation

    def after_load(self, step: int, captured: Mapping[str, str] | None = None) -> None:
        """After a resume, before the first step: log what was loaded, then clear the ring.

        The ``after_load`` checksums must equal the ``at_save`` ones of the checkpoint
        (FT006); ``captured`` replaces hashes taken at the moment of loading (state the
        framework consumes before the first step, such as the RNG). Then the resume stale
        slots are zeroed (SPEC §2). A no-op except once after a resume.
        """
        if not self._pending_load:
            return
        hooks = self._require()
        self._pending_load = False
        with step_context(step, ATTEMPT):
            hooks.log_checksums(
                ChecksumWhen.AFTER_LOAD, checkpoint=self.resume_from, captured=captured
            )
            hooks.clear_at_resume(self.resume_stale_ids)
            hooks.flush()

    # -- per step ------------------------------------------------------------------------

    def allocate(
        self, step: int, items: Sequence[int], inputs: torch.Tensor | None = None
    ) -> list[int]:
        """*Collective.* Witness ids of this rank's micro-batch of dataset ``items``.

        The micro-batches of all ranks are the next block of stream positions (rank
        order); each rank logs its positions with the fingerprints of ``inputs`` (row
        ``k`` is the model input of sample ``k``; None: no fingerprints) and the items it
        read. Rank 0 allocates for every rank's positions, logs the allocation and makes
        it durable before any rank trains with the ids.
        """
        hooks = self._require()
        gathered = self.gather(len(items))
        total = sum(gathered)
        self._count_step_ids(step, total)
        every = counter_positions(self.consumed, total)
        self.consumed += total
        offset = sum(gathered[: self.rank])
        mine = every[offset : offset + len(items)]
        info: WitnessInfo | None = None
        if self.is_driver:
            assert self.driver is not None
            with step_context(step, ATTEMPT):
                info = self.driver.allocate(step, ATTEMPT, every.tolist())
                self.driver.flush()
        info = self._broadcast(info)
        assert info is not None
        self._last = info
        if inputs is not None:
            with step_context(step, ATTEMPT):
                hooks.log_fingerprints(mine, inputs, items=list(items))
        hooks.flush()  # nothing of this rank's may lag behind the allocation
        return info.witness_ids[offset : offset + len(items)]

    def declare_order(
        self, epoch: int, items: Sequence[int], *, seed: int | None, shuffle: bool, sampler: str
    ) -> None:
        """Rank 0 declares which dataset item each stream position of ``epoch`` reads.

        An epoch is ``L = len(items)`` positions, read whole, so it starts at ``epoch * L``;
        ``items[k]`` is the item of its ``k``-th position as the loader's sampler orders
        it (read from the sampler itself, never re-implemented), laid out in the order
        :meth:`allocate` numbers the ranks' samples.
        """
        if not self.is_driver:
            return
        assert self.driver is not None and self.dataset_size is not None
        self.driver.log_data(
            DataOrder(
                epoch=epoch,
                start=epoch * len(items),
                items=[int(i) for i in items],
                dataset_size=self.dataset_size,
                seed=seed,
                shuffle=shuffle,
                sampler=sampler,
            )
        )

    def _count_step_ids(self, step: int, n: int) -> None:
        """Refuse, on every rank alike, a step whose micro-batches outgrow ``B - keep``."""
        before = self._step_ids[1] if self._step_ids[0] == step else 0
        self._step_ids = (step, before + n)
        limit = max_ids_per_step(self.buffer_size)
        if before + n > limit:
            raise UsageError(
                f"step {step} trains {before + n} samples on all ranks so far, but a witness "
                f"buffer of {self.buffer_size} allows at most {limit} per optimizer step: "
                f"pass buffer_size >= {min_buffer_size(before + n)}"
            )

    @contextmanager
    def batch(self, witness_ids: Sequence[int]) -> Iterator[None]:
        """Forwards (and backwards) inside carry one witness id per sample of the batch."""
        with self.witnesses.tokens(torch.as_tensor(list(witness_ids), dtype=torch.long)):
            yield

    def begin_batch(
        self, step: int, items: Sequence[int], inputs: torch.Tensor | None = None
    ) -> None:
        """*Collective.* :meth:`allocate` a micro-batch's ids; its forward and backward,
        until :meth:`end_batch` or the next micro-batch, carry them.

        For frameworks whose hooks see a micro-batch begin and end in separate calls.
        """
        ids = self.allocate(step, items, inputs)
        self._batch.close()  # the previous micro-batch's ids
        self._batch.enter_context(self.batch(ids))

    def end_batch(self) -> None:
        """The micro-batch begun by :meth:`begin_batch` is done (a no-op without one)."""
        self._batch.close()

    def after_optimizer_step(self, step: int) -> None:
        """Snapshot the nonzero witness rows, then zero the stale slots of the step."""
        hooks = self._require()
        if self._last is None:
            return  # no sample reached this step (an empty epoch tail)
        with step_context(step, ATTEMPT):
            hooks.after_optimizer_step(self._last.stale_ids)

    def end_step(self, step: int) -> None:
        """*Collective.* Every rank's evidence is durable: rank 0 commits the step."""
        hooks = self._require()
        hooks.flush()
        self.gather("normal")  # each rank reports only after its snapshot is durable
        if self.is_driver and self._last is not None:
            assert self.driver is not None
            self.driver.end_attempt(
                step, ATTEMPT, {self.cell: ranks(*["normal"] * self.world_size)}
            )
        self._last = None

    def log_metrics(self, step: int, values: Mapping[str, Any]) -> None:
        """Rank 0's numeric metrics of ``step`` (the framework already reduced them).

        Numbers and one-element tensors are kept; flags, text and the ``step`` entry
        (the step is the event's own) are not metrics.
        """
        if not self.is_driver or not self.started:
            return
        numbers = {k: n for k, v in values.items() if k != "step" and (n := _number(v)) is not None}
        if numbers:
            with step_context(step, ATTEMPT):
                self._require().log_metrics(numbers)

    # -- checkpoints ---------------------------------------------------------------------

    def _save_step(self, iteration: int) -> int:
        # a framework may save again the state it resumed from (Lightning does, right after
        # a resume at a save interval): log it in this incarnation's first step, never in
        # a step before its resume point
        return max(iteration, self.first_step)

    def log_save(self, iteration: int, path: str) -> None:
        """This rank's ``at_save`` checksums and its checkpoint snapshot (not yet complete)."""
        hooks = self._require()
        ref = CheckpointRef(iteration=iteration, incarnation=self.incarnation)
        with step_context(self._save_step(iteration), ATTEMPT):
            hooks.log_checksums(ChecksumWhen.AT_SAVE, checkpoint=ref)
            hooks.run.record_checkpoint(iteration, path=path, source=hooks.identity)

    def checkpoint_durable(self, iteration: int, path: str) -> None:
        """*Collective.* Every rank saved ``iteration``: rank 0 marks it complete."""
        self.gather(iteration)
        if self.is_driver:
            assert self.driver is not None
            with step_context(self._save_step(iteration), ATTEMPT):
                self.driver.record_checkpoint(iteration, path=path)

    def finish(self, status: RunStatus = RunStatus.COMPLETED) -> None:
        """Close this rank's writers; rank 0 logs the end of the incarnation."""
        self._batch.close()
        if self.hooks is not None:
            self.hooks.close()
        if self.driver is not None:
            self.driver.finish(status)
        self.hooks = None
        self.driver = None

    def _require(self) -> TrainerHooks:
        if self.hooks is None:
            raise RuntimeError("the ftaudit recorder was not started (no training began)")
        return self.hooks


def _number(value: object) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.item()) if value.numel() == 1 else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def largest_layer_stack(model: nn.Module) -> str:
    """The dotted path of the ``ModuleList`` holding most parameters: the layer stack.

    Transformers name it differently (``model.layers``, ``transformer.h``,
    ``gpt_neox.layers``); this is the witness default when no path is given.
    """
    best, size = "", -1
    for name, module in model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) > 0:
            n = sum(p.numel() for p in module.parameters())
            if n > size:
                best, size = name, n
    if size < 0:
        raise UsageError("the model has no layer list (nn.ModuleList): pass layers='path'")
    return best


def install_for_framework(
    model: nn.Module, buffer_size: int, layers: str | Sequence[str] | None
) -> WitnessSet:
    """Install witnesses (once) on the model's layer stack, on the model's device."""
    if hasattr(model, WITNESS_MODULE):
        return find_witnesses(model)
    witnesses = install_witnesses(
        model, buffer_size, layers=layers if layers is not None else largest_layer_stack(model)
    )
    device = next((p.device for p in model.parameters() if not p.is_meta), None)
    if device is not None:
        witnesses.to(device)
    return witnesses
