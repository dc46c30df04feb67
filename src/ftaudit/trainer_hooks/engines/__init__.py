"""Inference-engine weight checksums after each weight sync (SGLang, vLLM, torch modules).

Importing this package does not import torch: the HTTP adapters and the recorder run
in a rollout manager that may have no torch. :class:`TorchModuleEngine` (engines
embedded in the trainer) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftaudit.trainer_hooks.engines.base import (
    ERROR_TENSOR,
    EngineChecksumError,
    WeightChecksumSource,
    merge_ranks,
    rank_prefix,
)
from ftaudit.trainer_hooks.engines.http import SGLangEngine, VLLMEngine
from ftaudit.trainer_hooks.engines.recorder import EngineChecksumRecorder

if TYPE_CHECKING:
    from ftaudit.trainer_hooks.engines.torch_module import TorchModuleEngine

__all__ = [
    "ERROR_TENSOR",
    "EngineChecksumError",
    "EngineChecksumRecorder",
    "SGLangEngine",
    "TorchModuleEngine",
    "VLLMEngine",
    "WeightChecksumSource",
    "merge_ranks",
    "rank_prefix",
]


def __getattr__(name: str) -> Any:
    if name == "TorchModuleEngine":
        from ftaudit.trainer_hooks.engines.torch_module import TorchModuleEngine

        return TorchModuleEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
