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
  :class:`IndexedDataset`) gives the samples; rank 0 allocates their witness ids, tagged
  with the optimizer step they belong to (``global_step``), before the forward.
- ``on_before_optimizer_step`` marks the batch that steps (gradient accumulation);
  ``on_train_batch_end`` then snapshots, clears stale rows and commits the step.
- ``on_save_checkpoint`` (inside ``dump_checkpoint``, before the file is written) logs
  the ``at_save`` checksums; the checkpoint is marked complete at the next hook, once
  ``Trainer.save_checkpoint`` returned on every rank.
- ``state_dict``/``load_state_dict`` carry every rank's RNG states in the checkpoint
  (Lightning does not restore them itself), so a resume continues the random streams
  and their checksums at load equal those at save.

Lightning restores the position in a resumed epoch only for dataloaders with
``state_dict``/``load_state_dict``; with a plain ``DataLoader`` a mid-epoch resume starts
the epoch again, and FT005 reports the replayed samples.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import torch

from ftaudit.eventlog.writer import WriterOptions
from ftaudit.trainer_hooks.torch.extra_state import (
    portable_rng_states,
    prefixed_hashes,
    restore_portable_rng_states,
    rng_hashes,
)
from ftaudit.trainer_hooks.torch.indexed_data import batch_items, missing_index_error
from ftaudit.trainer_hooks.torch.indexed_data import stream_indices as _stream
from ftaudit.trainer_hooks.torch.step_recorder import StepRecorder, install_for_framework

if TYPE_CHECKING:  # the same API in both packages
    import lightning.pytorch as pl


class FtauditHooks:
    """Records a Lightning run for ``ft-verify`` (mixed into a ``Callback`` subclass).

    ``Trainer(callbacks=[FtauditCallback(run_dir, buffer_size=B)])`` with a training
    dataset wrapped in :class:`IndexedDataset` (or ``sample_items=`` reading the dataset
    indices of a batch of another shape).
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        buffer_size: int,
        layers: str | Sequence[str] | None = None,
        dataset_size: int | None = None,
        deterministic_order: bool | None = None,
        sample_items: Callable[[Any], list[int] | None] = batch_items,
        options: WriterOptions | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.buffer_size = buffer_size
        self.layers = layers
        self.dataset_size = dataset_size
        self.deterministic_order = deterministic_order
        self.sample_items = sample_items
        self.options = options
        self.recorder: StepRecorder | None = None
        self._ids = ExitStack()
        self._step: int | None = None
        self._stepping = False
        self._pending_save: int | None = None
        self._loaded_rng: dict[str, str] | None = None

    # -- setup ---------------------------------------------------------------------------

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self.recorder is not None:
            return
        witnesses = install_for_framework(pl_module, self.buffer_size, self.layers)
        self.recorder = StepRecorder(
            self.run_dir,
            buffer_size=self.buffer_size,
            witnesses=witnesses,
            deterministic_order=self.deterministic_order,
            options=self.options,
        )

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        recorder = self._require()
        if len(trainer.optimizers) != 1:
            raise ValueError("FtauditCallback supports one optimizer (automatic optimization)")
        resumed = trainer.global_step > 0
        recorder.start(
            pl_module,
            trainer.optimizers[0],
            resume_iteration=trainer.global_step - 1 if resumed else None,
            extra_hashes=lambda: self._extra_hashes(trainer),
            dataset_size=self.dataset_size or _dataset_size(trainer),
            config={
                "framework": "lightning",
                "max_steps": trainer.max_steps,
                "accumulate_grad_batches": trainer.accumulate_grad_batches,
            },
        )

    def _extra_hashes(self, trainer: pl.Trainer) -> dict[str, str]:
        """Schedulers, RNG and the loops' data position: restored besides the weights."""
        hashes = rng_hashes()
        for i, config in enumerate(trainer.lr_scheduler_configs):
            hashes.update(prefixed_hashes(f"sched{i}", config.scheduler.state_dict()))
        # Lightning derives the data position from these (a stateful loader adds its own)
        data = {"epoch": trainer.current_epoch, "global_step": trainer.global_step}
        hashes.update(prefixed_hashes("data", data))
        return hashes

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
        assert recorder.dataset_size is not None
        self._step = trainer.global_step
        ids = recorder.allocate(
            self._step, _stream(items, trainer.current_epoch, recorder.dataset_size)
        )
        self._ids.close()
        self._ids.enter_context(recorder.batch(ids))

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
        self._ids.close()
        if not self._stepping or self._step is None:
            return  # an accumulating micro-batch: the step goes on
        recorder = self._require()
        self._stepping = False
        recorder.after_optimizer_step(self._step)
        recorder.end_step(self._step)
        recorder.log_metrics(self._step, _numbers(trainer.logged_metrics))

    # -- checkpoints and the end ---------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Every rank's RNG states (gathered: only rank 0 writes the checkpoint)."""
        recorder = self._require()
        return {"rng": recorder.gather(portable_rng_states())}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
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
        self._ids.close()
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
        raise ValueError("FtauditCallback: give dataset_size= (the train loader has no dataset)")
    return len(dataset)


def _checkpoint_dir(trainer: pl.Trainer) -> str:
    callback = trainer.checkpoint_callback
    return str(getattr(callback, "dirpath", "") or "")


def _numbers(values: Mapping[str, Any]) -> dict[str, float]:
    out = {}
    for name, value in values.items():
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            out[name] = float(value.item())
        elif isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = float(value)
    return out
