"""``FtauditCallback`` for the Hugging Face ``transformers.Trainer``.

Written against transformers 5.24.0 (``transformers/trainer.py``, ``_run_epoch`` and
``_save_checkpoint``; ``transformers/trainer_callback.py``). What the Trainer does, and
where the callback hooks in:

- ``Trainer.__init__`` ends with ``on_init_end(model=...)``, before any optimizer exists:
  the witnesses are installed there, so the optimizer and DDP see their rows.
- ``on_epoch_begin`` (before the epoch's loader is iterated): rank 0 declares the epoch's
  order (``data_order``) from the Trainer's sampler, iterated with a copy of its
  generator so the real one is untouched. accelerate's ``BatchSamplerShard`` hands process
  ``p`` the sampler's batches ``p, p + W, ...``, so the ranks' micro-batches, rank 0's
  first, read the sampler's order as it is: position ``k`` of the epoch is its ``k``-th item.
- each micro-batch's forward: a forward pre-hook on the model takes the batch's
  ``ftaudit_sample_index`` (the dataset indices :class:`IndexedDataset` added) out of the
  inputs; the micro-batches of all ranks are the next positions of the data stream (the
  sample indices), rank 0 allocates their witness ids, tagged with the optimizer step
  the micro-batch belongs to (``state.global_step``), and each rank logs the
  fingerprints of its ``input_ids`` with the items it read (FT008 compares them with the
  declared order). Gradient accumulation thus allocates once per micro-batch.
- ``on_optimizer_step`` (right after ``optimizer.step()``): snapshot, then clear stale rows.
- ``on_step_end``: every rank reports; rank 0 commits the step.
- ``on_save`` (after ``_save_checkpoint`` wrote the checkpoint): ``at_save`` checksums of
  model, optimizer, scheduler, RNG and data position; rank 0 marks the checkpoint
  complete once every rank did.
- the consumed-positions counter is saved in each checkpoint's ``trainer_state.json``
  (the callback is an ``ExportableState``); a resume (``train(resume_from_checkpoint=...)``)
  continues the stream from it and is a new incarnation, opened at ``on_train_begin``;
  its ``after_load`` checksums are logged at the first
  ``on_step_begin``, after the Trainer restored the RNG states (``_load_rng_state``).
- ``on_log``: rank 0's logged values become ftaudit metrics of the step.

Steps: the Trainer's ``global_step`` counts finished optimizer steps; the ftaudit step of
an optimizer step is ``global_step`` before it, so ``checkpoint-G`` is ftaudit checkpoint
iteration ``G - 1`` and its resume starts at step ``G``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.utils.data import RandomSampler
from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_callback import ExportableState

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.torch.extra_state import restored_state_hashes
from ftaudit.trainer_hooks.torch.indexed_data import (
    SAMPLE_INDEX_KEY,
    batch_inputs,
    missing_index_error,
)
from ftaudit.trainer_hooks.torch.loader import base_sampler, epoch_order
from ftaudit.trainer_hooks.torch.step_recorder import (
    FrameworkCallback,
    StepRecorder,
    resume_point,
)


class FtauditCallback(FrameworkCallback, TrainerCallback, ExportableState):
    """Records a ``transformers.Trainer`` run for ``ft-verify``.

    ``Trainer(..., train_dataset=IndexedDataset(ds), callbacks=[FtauditCallback(run_dir,
    buffer_size=B)])``; the arguments are :class:`FrameworkCallback`'s.
    """

    _state: TrainerState | None = None
    _args: TrainingArguments | None = None
    _scheduler: Any = None
    _epoch = 0
    _hook: Any = None

    # -- setup ---------------------------------------------------------------------------

    def on_init_end(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        **kwargs: Any,
    ) -> None:
        if model is None:
            raise UsageError("FtauditCallback needs the Trainer's model at init")
        if args.remove_unused_columns:
            # the Trainer's RemoveColumnsCollator keeps only the model's forward arguments,
            # so it would drop every batch's sample indices
            raise UsageError(
                f"FtauditCallback needs TrainingArguments(remove_unused_columns=False): the "
                f"Trainer would drop {SAMPLE_INDEX_KEY!r} from the batches (remove unused "
                "columns from the dataset yourself)"
            )
        self.recorder = StepRecorder.for_model(model, self.settings)
        self._hook = model.register_forward_pre_hook(self._pre_forward, with_kwargs=True)

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        lr_scheduler: Any = None,
        train_dataloader: Any = None,
        **kwargs: Any,
    ) -> None:
        recorder = self._require()
        if model is None or optimizer is None:
            raise UsageError("FtauditCallback needs the Trainer's model and optimizer")
        self._state, self._args, self._scheduler = state, args, lr_scheduler
        resume_iteration, consumed = resume_point(state.global_step, _saved_consumed(state))
        recorder.start(
            model,
            optimizer,
            resume_iteration=resume_iteration,
            extra_hashes=self._extra_hashes,
            dataset_size=self.settings.dataset_size or len(train_dataloader.dataset),
            consumed=consumed,
            config={
                "framework": "transformers",
                "output_dir": args.output_dir,
                "seed": args.seed,
                "per_device_train_batch_size": args.per_device_train_batch_size,
                "gradient_accumulation_steps": args.gradient_accumulation_steps,
            },
        )

    def _extra_hashes(self) -> dict[str, str]:
        """Scheduler, RNG and data position: what a resume restores besides the weights."""
        args, state = self._args, self._state
        assert args is not None and state is not None
        schedulers = {"sched": self._scheduler} if self._scheduler is not None else {}
        # the Trainer derives its data position from these (skip global_step's batches of
        # the epoch, shuffled by the seed): a resume must restore them
        data = {
            "global_step": state.global_step,
            "epoch": state.epoch,
            "seed": args.seed,
            "data_seed": args.data_seed,
        }
        return restored_state_hashes(schedulers, data)

    # -- per step ------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """Saved in each checkpoint's ``trainer_state.json``: the stream positions consumed."""
        consumed = self.recorder.consumed if self.recorder is not None else 0
        args = {
            "run_dir": os.fspath(self.settings.run_dir),
            "buffer_size": self.settings.buffer_size,
        }
        return {"args": args, "attributes": {"consumed": consumed}}

    def on_epoch_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        train_dataloader: Any = None,
        **kw: Any,
    ) -> None:
        self._state = state
        self._epoch = math.floor(state.epoch or 0)
        sampler = base_sampler(train_dataloader)
        order = epoch_order(sampler, self._epoch)
        if order is not None:
            self._require().declare_order(
                self._epoch,
                order,
                seed=args.data_seed if args.data_seed is not None else args.seed,
                shuffle=isinstance(sampler, RandomSampler),
                sampler=type(sampler).__name__,
            )

    def on_step_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._state = state
        self._require().after_load(state.global_step)

    def _pre_forward(
        self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        items = self.sample_items(kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k != SAMPLE_INDEX_KEY}
        if not (module.training and torch.is_grad_enabled()):
            return args, kwargs  # evaluation: nothing to witness
        if items is None:
            raise missing_index_error("FtauditCallback")
        recorder, state = self._require(), self._state
        assert state is not None
        inputs = batch_inputs(kwargs, self.settings.input_key, "FtauditCallback")
        recorder.begin_batch(state.global_step, items, inputs)
        return args, kwargs

    def on_optimizer_step(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._require().after_optimizer_step(state.global_step)

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        recorder = self._require()
        recorder.end_batch()
        recorder.end_step(state.global_step - 1)

    # -- checkpoints, metrics, end -------------------------------------------------------

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        recorder = self._require()
        iteration = state.global_step - 1
        path = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        recorder.log_save(iteration, path)
        recorder.checkpoint_durable(iteration, path)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: Mapping[str, Any] | None = None,
        **kw: Any,
    ) -> None:
        if logs and state.global_step > 0 and self.recorder is not None:
            self.recorder.log_metrics(state.global_step - 1, logs)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kw: Any
    ) -> None:
        self._require().finish()

    def _require(self) -> StepRecorder:
        if self.recorder is None:
            raise RuntimeError(
                "FtauditCallback was not initialised: pass it in Trainer(callbacks=[...]) so "
                "it installs the witnesses before the optimizer is built"
            )
        return self.recorder


def _saved_consumed(state: TrainerState) -> int | None:
    """The stream positions the loaded checkpoint had consumed (saved by :meth:`state` in
    its ``trainer_state.json``), None where it holds none."""
    saved = (state.stateful_callbacks or {}).get(FtauditCallback.__name__)
    if not isinstance(saved, Mapping):
        return None
    return int(saved["attributes"]["consumed"])
