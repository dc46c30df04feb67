"""``from ftaudit.integrations.pytorch_lightning import FtauditCallback, IndexedDataset``:
the same callback for the standalone ``pytorch_lightning`` package (extra ``lightning``)."""

from ftaudit.trainer_hooks.lightning.pl_callback import FtauditCallback
from ftaudit.trainer_hooks.torch.indexed_data import SAMPLE_INDEX_KEY, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
