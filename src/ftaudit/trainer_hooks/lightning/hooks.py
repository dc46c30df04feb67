"""The hooks of ``FtauditCallback`` for Lightning's ``Trainer``, for either package.

``lightning.pytorch`` and the standalone ``pytorch_lightning`` have distinct ``Callback``
classes, so :class:`FtauditHooks` holds the behaviour and
:mod:`ftaudit.trainer_hooks.lightning.callback` / ``pl_callback`` add the base class.

Written against lightning 2.6.6 (``lightning/pytorch/callbacks/callback.py`` for the hooks,
``trainer/trainer.py`` ``_run`` for their order, ``loops/training_epoch_loop.py`` and
``loops/fit_loop.py`` for batches and resumes, ``trainer/connectors/checkpoint_connector.py``
``dump_checkpoint``). Where the callback hooks in:

- ``setup`` runs before ``configure_optimizers``, DDP wrapping and the checkpoint
  restore: the witnesses are installed on the LightningModule there.
- ``on_train_start`` opens the incarnation; a run whose restored ``global_step`` is G
  resumed from ftaudit checkpoint iteration G - 1.
- ``on_train_batch_start``: the batch's ``ftaudit_sample_index`` (from
  :class:`IndexedDataset`) gives the items read; the batches of all ranks are the next
  positions of the data stream (the sample indices, rank 0's first); rank 0 allocates
  their witness ids, tagged with the optimizer step they belong to (``global_step``),
  before the forward, and each rank logs the fingerprints of its ``input_key`` rows with
  the items. At an epoch's first batch rank 0 declares the epoch's order (``data_order``)
  from the loader's sampler: a ``DistributedSampler`` through
  :class:`~ftaudit.trainer_hooks.torch.loader.SamplerStream`, another by iterating a copy.
- ``on_before_optimizer_step`` marks the batch that steps (gradient accumulation);
  ``on_train_batch_end`` then snapshots, clears stale rows and commits the step.
- ``on_save_checkpoint`` (inside ``dump_checkpoint``, before the file is written) logs
  the ``at_save`` checksums; the checkpoint is marked complete at the next hook, once
  ``Trainer.save_checkpoint`` returned on every rank.
- ``state_dict``/``load_state_dict`` carry every rank's RNG states in the checkpoint
  (Lightning does not restore them itself), so a resume continues the random streams
  and their checksums at load equal those at save, and the stream positions consumed,
  so a resume continues the stream where the checkpoint left it.

Lightning restores the position in a resumed epoch only for dataloaders with
``state_dict``/``load_state_dict``; with a plain ``DataLoader`` a mid-epoch resume starts
the epoch again: the positions after the checkpoint then read the epoch's first items,
and FT008 names them (items other than the declared order's, trained twice in the epoch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.torch.extra_state import (
    portable_rng_states,
    restore_portable_rng_states,
    restored_state_hashes,
    rng_hashes,
)
from ftaudit.trainer_hooks.torch.indexed_data import (
    batch_inputs,
    missing_index_error,
)
from ftaudit.trainer_hooks.torch.loader import SamplerStream, base_sampler, epoch_order
from ftaudit.trainer_hooks.torch.step_recorder import (
    FrameworkCallback,
    StepRecorder,
    resume_point,
)

if TYPE_CHECKING:  # the same API in both packages
    import lightning.pytorch as pl


class FtauditHooks(FrameworkCallback):
    """Records a Lightning run for ``ft-verify`` (mixed into a ``Callback`` subclass).

    ``Trainer(callbacks=[FtauditCallback(run_dir, buffer_size=B)])`` with a training
    dataset wrapped in :class:`IndexedDataset` (or ``sample_items=`` reading the dataset
    indices of a batch of another shape). ``input_key`` names the batch tensor whose rows
    are fingerprinted per sample (None: no fingerprints, FT008 cannot check the items).
    ``data_manifest`` (a ``DatasetManifest`` or a manifest file) is the training dataset's:
    FT008 then checks every fed sample's content against its item. The arguments are
    :class:`FrameworkCallback`'s.
    """

    _step: int | None = None
    _stepping = False
    _pending_save: int | None = None
    _loaded_rng: dict[str, str] | None = None
    _loaded_consumed: int | None = None
    _declared_epoch: int | None = None

    # -- setup ---------------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self.recorder is not None:
            return
        self.recorder = StepRecorder.for_model(pl_module, self.settings)

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        recorder = self._require()
        if len(trainer.optimizers) != 1:
            raise UsageError("FtauditCallback supports one optimizer (automatic optimization)")
        resume_iteration, consumed = resume_point(trainer.global_step, self._loaded_consumed)
        recorder.start(
            pl_module,
            trainer.optimizers[0],
            resume_iteration=resume_iteration,
            extra_hashes=lambda: self._extra_hashes(trainer),
            dataset_size=self.settings.dataset_size or _dataset_size(trainer),
            consumed=consumed,
            config={
                "framework": "lightning",
                "max_steps": trainer.max_steps,
                "accumulate_grad_batches": trainer.accumulate_grad_batches,
            },
        )

    def _extra_hashes(self, trainer: pl.Trainer) -> dict[str, str]:
        """Schedulers, RNG and the loops' data position: restored besides the weights."""
        schedulers = {f"sched{i}": c.scheduler for i, c in enumerate(trainer.lr_scheduler_configs)}
        # Lightning derives the data position from these (a stateful loader adds its own)
        data = {"epoch": trainer.current_epoch, "global_step": trainer.global_step}
        return restored_state_hashes(schedulers, data)

    # -- per batch -----------------------------------------------------------------------

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        recorder = self._require()
        self._mark_saved()
        recorder.after_load(trainer.global_step, self._loaded_rng)
        items = self.sample_items(batch)
        if items is None:
            raise missing_index_error("FtauditCallback")
        if self._declared_epoch != trainer.current_epoch:
            self._declared_epoch = trainer.current_epoch
            _declare_order(recorder, trainer, len(items))
        self._step = trainer.global_step
        inputs = batch_inputs(batch, self.settings.input_key, "FtauditCallback")
        recorder.begin_batch(self._step, items, inputs)

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        self._stepping = True

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        recorder = self._require()
        recorder.end_batch()
        if not self._stepping or self._step is None:
            return  # an accumulating micro-batch: the step goes on
        self._stepping = False
        recorder.after_optimizer_step(self._step)
        recorder.end_step(self._step)
        recorder.log_metrics(self._step, trainer.logged_metrics)

    # -- checkpoints and the end ---------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Every rank's RNG states (gathered: only rank 0 writes the checkpoint)."""
        recorder = self._require()
        return {"rng": recorder.gather(portable_rng_states()), "consumed": recorder.consumed}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._loaded_consumed = state_dict.get("consumed")
        states = state_dict.get("rng") or []
        rank = self._require().rank
        if rank < len(states):
            restore_portable_rng_states(states[rank])
            self._loaded_rng = rng_hashes()  # compared at load: what is restored here

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        recorder = self._require()
        if not recorder.started:
            return
        iteration = int(checkpoint["global_step"]) - 1
        recorder.log_save(iteration, _checkpoint_dir(trainer))
        self._pending_save = iteration

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._mark_saved()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._mark_saved()
        self._require().finish()

    def _mark_saved(self) -> None:
        """The last checkpoint is written on every rank: rank 0 marks it complete."""
        if self._pending_save is None:
            return
        iteration, self._pending_save = self._pending_save, None
        self._require().checkpoint_durable(iteration, "")

    def _require(self) -> StepRecorder:
        if self.recorder is None:
            raise RuntimeError("FtauditCallback was not set up (pass it in Trainer(callbacks=))")
        return self.recorder


def _dataset_size(trainer: pl.Trainer) -> int:
    loader = trainer.train_dataloader
    dataset = getattr(loader, "dataset", None)
    if dataset is None:
        raise UsageError("FtauditCallback: give dataset_size= (the train loader has no dataset)")
    return len(dataset)


def _declare_order(recorder: StepRecorder, trainer: pl.Trainer, batch_size: int) -> None:
    """Rank 0 declares the epoch's order, read from the train loader's sampler."""
    sampler = base_sampler(trainer.train_dataloader)
    if hasattr(sampler, "num_replicas") and hasattr(sampler, "total_size"):
        stream = SamplerStream(sampler, batch_size=batch_size)
        order = stream.rank_major_order(trainer.current_epoch).tolist()
        seed = int(sampler.seed)
    else:
        order, seed = epoch_order(sampler, trainer.current_epoch), None
    if order is not None:
        recorder.declare_order(
            trainer.current_epoch,
            order,
            seed=seed,
            shuffle=bool(getattr(sampler, "shuffle", False)),
            sampler=type(sampler).__name__,
        )


def _checkpoint_dir(trainer: pl.Trainer) -> str:
    callback = trainer.checkpoint_callback
    return str(getattr(callback, "dirpath", "") or "")
