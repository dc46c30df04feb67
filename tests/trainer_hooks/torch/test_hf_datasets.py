"""FT008 on a real Hugging Face ``datasets.Dataset`` (5.2.0) fed by a torch ``DataLoader``.

The dataset is built in process from a dict and read in ``with_format("torch")`` through
:class:`IndexedDataset` (which adds each row's index), a shuffling
``DistributedSampler`` and the default collator; the hooks fingerprint the collated
``input_ids`` the model receives. The correct run verifies against the manifest built
from the dataset itself. Its twin loads the same rows from a reshuffled copy of the
dataset (``ds.shuffle``, the same ids, other items: the class of "right indices, wrong
data"), and FT008 alone names the items.
"""

from __future__ import annotations

from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch")

from torch.utils.data import DataLoader  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

from ftaudit.dataset import build_manifest  # noqa: E402
from ftaudit.trainer_hooks import DriverSession, ranks  # noqa: E402
from ftaudit.trainer_hooks.torch import (  # noqa: E402
    SamplerStream,
    TrainerHooks,
    install_witnesses,
    sample_token_ids,
)
from ftaudit.trainer_hooks.torch.indexed_data import IndexedDataset, batch_items  # noqa: E402
from ftaudit.verifier import verify  # noqa: E402
from tests.support.torch_models import VOCAB, lm_loss, make_model  # noqa: E402

pytestmark = pytest.mark.torch

N, SEQ, BATCH, STEPS, B = 16, 6, 4, 6, 32  # 4 batches per epoch: steps 4-5 are epoch 1


def corpus() -> datasets.Dataset:
    ids = torch.randint(0, VOCAB, (N, SEQ), generator=torch.Generator().manual_seed(7))
    return datasets.Dataset.from_dict(
        {"input_ids": ids.tolist(), "text": [f"doc {i}" for i in range(N)]}
    ).with_format("torch")


def train(run_dir: Path, dataset: datasets.Dataset, loaded: datasets.Dataset) -> None:
    """Train on ``loaded`` while the run declares ``dataset`` (its manifest and order)."""
    driver = DriverSession.start(run_dir, buffer_size=B, dataset_size=N, deterministic_order=True)
    driver.declare_manifest(build_manifest(dataset, field="input_ids", description="corpus"))
    sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True, seed=3)
    loader = DataLoader(IndexedDataset(loaded), batch_size=BATCH, sampler=sampler)
    stream = SamplerStream(sampler, batch_size=BATCH)
    model = make_model()
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    hooks = TrainerHooks.attach(run_dir, 0, cell=0, rank=0, model=model, optimizer=optimizer)
    for step in range(STEPS):
        epoch, batch = stream.locate(step)
        if batch == 0:
            sampler.set_epoch(epoch)
            batches = iter(loader)
            driver.log_data(stream.data_order(epoch))
        positions = stream.step_positions(epoch, batch)
        info = driver.allocate(step, 0, positions)
        rows = next(batches)
        tokens = rows["input_ids"]
        with hooks.step(step, 0):
            hooks.log_fingerprints(positions, tokens, items=batch_items(rows))
            with hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                lm_loss(model(tokens), tokens).backward()
            optimizer.step()
            optimizer.zero_grad()
            hooks.after_optimizer_step(info.stale_ids, checksum=True)
        driver.end_attempt(step, 0, {0: ranks("normal")})
    hooks.close()
    driver.finish()


def test_a_hugging_face_dataset_verifies_against_its_manifest(tmp_path: Path) -> None:
    ds = corpus()
    train(tmp_path, ds, ds)
    report = verify(tmp_path)
    assert report.passed(strict=True), report.to_dict()
    ft008 = next(r for r in report.results if r.code == "FT008")
    assert ft008.checked == STEPS * BATCH
    assert ft008.note.startswith("checked against dataset manifest")


def test_rows_of_a_reshuffled_copy_under_the_same_ids_fail_ft008(tmp_path: Path) -> None:
    ds = corpus()
    reshuffled = ds.shuffle(seed=1)
    train(tmp_path, ds, reshuffled)
    report = verify(tmp_path)
    failed = {r.code for r in report.results if any(v.severity == "error" for v in r.violations)}
    assert failed == {"FT008"}, report.to_dict()
    wrong = [v for r in report.results for v in r.violations if v.kind == "wrong_content"]
    assert wrong and all("should be item" in v.message for v in wrong)
    # exactly the positions whose item the reshuffle moved (a few may stay in place)
    moved = {i for i in range(N) if not torch.equal(ds[i]["input_ids"], reshuffled[i]["input_ids"])}
    stream = SamplerStream(DistributedSampler(ds, 1, 0, shuffle=True, seed=3), batch_size=BATCH)
    order = [*stream.epoch_order(0), *stream.epoch_order(1)]
    assert {i for v in wrong for i in v.sample_indices} == {
        p for p in range(STEPS * BATCH) if order[p] in moved
    }
