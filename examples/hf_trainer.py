"""A Hugging Face ``Trainer`` run recorded by ftaudit, then verified and exported.

Run it:  python examples/hf_trainer.py [RUN_DIR]
(or on 2 processes: torchrun --nproc-per-node 2 examples/hf_trainer.py RUN_DIR)

A tiny Llama built from a config (no download), 4 steps of 2 accumulated micro-batches,
a checkpoint every 2 steps. Resume it with ``trainer.train(resume_from_checkpoint=True)``:
that is a new incarnation of the same ftaudit run.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

from ftaudit.integrations.hf import FtauditCallback, IndexedDataset


class Tokens(torch.utils.data.Dataset):
    """Any map-style dataset of dict items; IndexedDataset adds each item's index."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids = torch.randint(0, 64, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def main(work: Path) -> None:
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
        )
    )
    args = TrainingArguments(
        output_dir=str(work / "checkpoints"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_steps=4,
        save_steps=2,
        logging_steps=1,
        use_cpu=True,
        report_to=[],
        remove_unused_columns=False,  # keep ftaudit_sample_index in the batches
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=IndexedDataset(Tokens()),
        # B: one step trains 4 x 2 samples per process; B=64 allows 19 per step
        callbacks=[FtauditCallback(work / "run", buffer_size=64)],
    )
    trainer.train()

    if trainer.is_world_process_zero():
        from ftaudit.verifier import verify

        report = verify(work / "run")
        print("verified" if report.passed() else report.to_dict())


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
