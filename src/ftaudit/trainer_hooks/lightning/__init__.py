"""Lightning integration (extra ``lightning``): :class:`FtauditCallback`.

Importing it imports torch and ``lightning``; the public paths are
:mod:`ftaudit.integrations.lightning` and, for the standalone ``pytorch_lightning``
package, :mod:`ftaudit.integrations.pytorch_lightning`.
"""

from ftaudit.trainer_hooks.lightning.callback import FtauditCallback
from ftaudit.trainer_hooks.torch.indexed_data import SAMPLE_INDEX_KEY, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
