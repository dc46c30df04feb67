"""``transformers.Trainer`` on a real Hugging Face ``datasets.Dataset`` (5.2.0), one process.

The tokenized dataset is built in process from a dict, read in ``with_format("torch")``
through :class:`IndexedDataset`, and its manifest (``build_manifest(ds,
field="input_ids")``) is handed to ``FtauditCallback(data_manifest=...)``. The correct run
verifies with FT008 checking every fed sample against the manifest; its twin trains on a
reshuffled copy (``ds.shuffle``: the same indices, other rows) and FT008 alone names the
items (transformers 5.24.0).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")
pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments  # noqa: E402

from ftaudit.dataset import build_manifest  # noqa: E402
from ftaudit.integrations.hf import FtauditCallback, IndexedDataset  # noqa: E402
from ftaudit.verifier import verify  # noqa: E402

pytestmark = pytest.mark.slow

N, SEQ, VOCAB, STEPS, BATCH = 12, 8, 64, 8, 2  # 6 steps an epoch: steps 6-7 are epoch 1


def corpus() -> datasets.Dataset:
    ids = torch.randint(0, VOCAB, (N, SEQ), generator=torch.Generator().manual_seed(3))
    return datasets.Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})


def train(run_dir: Path, declared: datasets.Dataset, loaded: datasets.Dataset) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
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
    args = TrainingArguments(
        output_dir=str(run_dir / "out"),
        per_device_train_batch_size=BATCH,
        max_steps=STEPS,
        save_strategy="no",
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        seed=0,
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,  # keep ftaudit_sample_index in the batches
    )
    callback = FtauditCallback(
        run_dir / "run",
        buffer_size=16,
        data_manifest=build_manifest(declared, field="input_ids", description="corpus"),
    )
    trainer = Trainer(
        model=LlamaForCausalLM(config),
        args=args,
        train_dataset=IndexedDataset(loaded.with_format("torch")),
        callbacks=[callback],
    )
    trainer.train()


def test_trainer_on_a_datasets_dataset_verifies_against_its_manifest(tmp_path: Path) -> None:
    ds = corpus()
    train(tmp_path, ds, ds)
    report = verify(tmp_path / "run")
    assert report.passed(strict=True), report.to_dict()
    ft008 = next(r for r in report.results if r.code == "FT008")
    assert ft008.checked == STEPS * BATCH
    assert ft008.note.startswith("checked against dataset manifest")


def test_a_reshuffled_copy_under_the_same_indices_fails_ft008(tmp_path: Path) -> None:
    ds = corpus()
    train(tmp_path, ds, ds.shuffle(seed=1))
    report = verify(tmp_path / "run")
    failed = {r.code for r in report.results if any(v.severity == "error" for v in r.violations)}
    assert failed == {"FT008"}, report.to_dict()
    wrong = [v for r in report.results for v in r.violations if v.kind == "wrong_content"]
    assert wrong and all("should be item" in v.message for v in wrong)
