"""Hugging Face ``transformers.Trainer`` integration (extra ``hf``): :class:`FtauditCallback`.

Importing it imports torch and transformers; the public path is
:mod:`ftaudit.integrations.hf`.
"""

from ftaudit.trainer_hooks.hf.callback import FtauditCallback
from ftaudit.trainer_hooks.torch.indexed_data import SAMPLE_INDEX_KEY, IndexedDataset

__all__ = ["SAMPLE_INDEX_KEY", "FtauditCallback", "IndexedDataset"]
