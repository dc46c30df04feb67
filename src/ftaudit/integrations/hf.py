"""``from ftaudit.integrations.hf import FtauditCallback, IndexedDataset`` (extra ``hf``)."""

from ftaudit.trainer_hooks.hf import SAMPLE_INDEX_KEY, FtauditCallback, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
