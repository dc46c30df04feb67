"""Inference-engine weight checksums after each weight sync (SGLang, vLLM, torch modules).

:class:`VLLMEngine` is experimental: it follows an unmerged vLLM pull request.
Importing this package does not import torch: the HTTP adapters and the recorder run
in a rollout manager that may have no torch. :class:`TorchModuleEngine` (engines
embedded in the trainer) is imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ftaudit.trainer_hooks.engines.base import (
    ERROR_TENSOR,
    ChecksumUnsupportedError,
    EngineChecksumError,
    WeightChecksumSource,
    merge_ranks,
    rank_label,
)
from ftaudit.trainer_hooks.engines.recorder import EngineChecksumRecorder
from ftaudit.trainer_hooks.engines.sglang import SGLangEngine
from ftaudit.trainer_hooks.engines.vllm import VLLMEngine

if TYPE_CHECKING:
    from ftaudit.trainer_hooks.engines.torch_module import TorchModuleEngine

__all__ = [
    "ERROR_TENSOR",
    "ChecksumUnsupportedError",
    "EngineChecksumError",
    "EngineChecksumRecorder",
    "SGLangEngine",
    "TorchModuleEngine",
    "VLLMEngine",
    "WeightChecksumSource",
    "merge_ranks",
    "rank_label",
]


def __getattr__(name: str) -> Any:
    if name == "TorchModuleEngine":
        from ftaudit.trainer_hooks.engines.torch_module import TorchModuleEngine

        return TorchModuleEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
