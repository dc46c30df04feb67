"""Samples that carry their own index through a framework's data pipeline.

A framework callback must log the samples the dataloader actually yielded, not the
ones it was supposed to yield: a resume that skips or replays batches is exactly the
defect to catch. So every item carries its dataset index under :data:`SAMPLE_INDEX_KEY`
through the sampler, the workers and the collator, and the callback reads it from the
batch the training step receives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

from ftaudit.errors import UsageError

SAMPLE_INDEX_KEY = "ftaudit_sample_index"
"""The batch key holding each sample's dataset index (a [batch] integer tensor)."""


class IndexedDataset(Dataset[dict[str, Any]]):
    """A map-style dataset of dict items, each with its index added under the key above."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.dataset[index]
        if not isinstance(item, Mapping):
            raise TypeError(
                f"IndexedDataset needs dict items to add {SAMPLE_INDEX_KEY!r}, got "
                f"{type(item).__name__}"
            )
        return {**item, SAMPLE_INDEX_KEY: int(index)}


def batch_items(batch: Any) -> list[int] | None:
    """The dataset indices of a collated batch, or None when it carries none."""
    if not isinstance(batch, Mapping) or SAMPLE_INDEX_KEY not in batch:
        return None
    value = batch[SAMPLE_INDEX_KEY]
    if isinstance(value, torch.Tensor):
        return [int(x) for x in value.reshape(-1).tolist()]
    if isinstance(value, Sequence):
        return [int(x) for x in value]
    raise TypeError(f"{SAMPLE_INDEX_KEY!r} holds {type(value).__name__}, not indices")


def batch_inputs(batch: Any, key: str | None, where: str) -> torch.Tensor | None:
    """The model input under ``key`` whose rows are fingerprinted (None: key None)."""
    if key is None:
        return None
    value = batch.get(key) if isinstance(batch, Mapping) else None
    if not isinstance(value, torch.Tensor):
        raise UsageError(
            f"{where}: a training batch has no tensor {key!r} to fingerprint per sample: pass "
            "input_key= naming the model input (or input_key=None for no fingerprints)"
        )
    return value


def missing_index_error(where: str) -> ValueError:
    """The error for a training batch without indices (the dataset was not wrapped)."""
    return ValueError(
        f"{where}: a training batch has no {SAMPLE_INDEX_KEY!r}: wrap the training dataset "
        "in ftaudit's IndexedDataset so ftaudit records the samples each step trains"
    )
