"""One process of a 2-process ``transformers.Trainer`` run, launched by torchrun.

Upstream (transformers 5.24.0, ``transformers/trainer.py``): ``_run_epoch`` skips the
first ``global_step % steps_per_epoch * grad_accum`` batches of the resumed epoch with
``skip_first_batches`` unless ``args.ignore_data_skip``; ``_load_rng_state`` restores each
process's ``rng_state_{i}.pth``; ``_save_checkpoint`` then ``on_save``. Launched as
``torchrun --nproc-per-node 2 hf_child.py RUN_DIR OUT_DIR MODE`` where MODE is
``fresh``, ``kill@S`` (SIGKILL rank 1 inside optimizer step S), ``resume`` or
``resume-ignore-data-skip`` (the bug: the resumed epoch starts again at its first batch).
"""

from __future__ import annotations

import gc
import os
import signal
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
import torch.distributed as dist
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

from ftaudit.integrations.hf import FtauditCallback, IndexedDataset

DATASET, SEQ, VOCAB = 32, 8, 64
BUFFER = 32  # one step: 2 ranks x 2 per device x 2 accumulated = 8 ids <= 32 - 22
STEPS, SAVE_EVERY = 8, 3


class Tokens(torch.utils.data.Dataset):
    """A fixed synthetic corpus: item i is the same sequence in every process and run."""

    def __len__(self) -> int:
        return DATASET

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


class KillAt(TrainerCallback):
    """SIGKILL rank 1 inside optimizer step ``step`` (after its forward, before the update)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_pre_optimizer_step(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
        if state.global_step == self.step and int(os.environ.get("RANK", "0")) == 1:
            os.kill(os.getpid(), signal.SIGKILL)


def main(run_dir: str, out_dir: str, mode: str) -> None:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=SEQ,
    )
    model = LlamaForCausalLM(config)
    args = TrainingArguments(
        output_dir=out_dir,
        per_device_train_batch_size=2,
        gradient_accumulation_steps=2,
        max_steps=STEPS,
        save_strategy="steps",
        save_steps=SAVE_EVERY,
        logging_steps=1,
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        seed=0,
        disable_tqdm=True,
        ddp_backend="gloo",
        dataloader_num_workers=0,
        remove_unused_columns=False,  # keep ftaudit_sample_index in the batches
        ignore_data_skip=mode == "resume-ignore-data-skip",
    )
    callbacks: list[TrainerCallback] = [FtauditCallback(run_dir, buffer_size=BUFFER)]
    if mode.startswith("kill@"):
        callbacks.append(KillAt(int(mode.split("@")[1])))
    trainer = Trainer(
        model=model, args=args, train_dataset=IndexedDataset(Tokens()), callbacks=callbacks
    )
    trainer.train(resume_from_checkpoint=mode.startswith("resume") or None)


if __name__ == "__main__":
    main(*sys.argv[1:4])
    # as examples/torchrun_ddp.py: a process group left to interpreter exit lets gloo's
    # threads abort the process now and then (SIGABRT), which torchrun reports as a failure
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()
