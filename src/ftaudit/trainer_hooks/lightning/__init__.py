"""Lightning integration (extra ``lightning``): :class:`FtauditCallback`.

Importing it imports torch and Lightning; the public path is
:mod:`ftaudit.integrations.lightning`.
"""

from ftaudit.trainer_hooks.lightning.callback import FtauditCallback
from ftaudit.trainer_hooks.torch.indexed_data import SAMPLE_INDEX_KEY, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
