"""``from ftaudit.integrations.lightning import FtauditCallback, IndexedDataset`` (extra
``lightning``)."""

from ftaudit.trainer_hooks.lightning import SAMPLE_INDEX_KEY, FtauditCallback, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
