"""Weight checksums of an inference engine embedded in the trainer process (torch modules).

The engine's weights are hashed with :func:`ftaudit.trainer_hooks.torch.tensor_hash`
(dtype, shape and exact bytes), the same hash the trainer's checksums use. Witness rows
are left out: they are not sent to inference engines.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.engines.base import EngineChecksumError, merge_ranks, rank_label
from ftaudit.trainer_hooks.torch.checksums import tensor_hash, unwrap
from ftaudit.trainer_hooks.torch.witness import is_witness_name


class TorchModuleEngine:
    """An engine made of torch modules in this process: one module per tensor-parallel rank.

    Tensors are the modules' ``state_dict()`` entries (parameters and persistent
    buffers), named ``tp{i}/<name>`` for the module of rank ``i``.
    """

    kind = "torch"

    def __init__(
        self, modules: nn.Module | Sequence[nn.Module], *, name: str = "in-process"
    ) -> None:
        self.modules = [modules] if isinstance(modules, nn.Module) else list(modules)
        if not self.modules:
            raise UsageError("an in-process engine needs at least one module")
        self.name = name

    def describe(self) -> str:
        return f"torch {self.name}"

    def checksums(self) -> dict[str, str]:
        try:
            per_rank = [
                (
                    rank_label(("tp", rank)),
                    {
                        key: tensor_hash(value)
                        for key, value in unwrap(module).state_dict().items()
                        if not is_witness_name(key)
                    },
                )
                for rank, module in enumerate(self.modules)
            ]
        except RuntimeError as exc:  # e.g. a tensor on a device that failed
            raise EngineChecksumError(self.describe(), f"cannot hash the weights: {exc}") from exc
        return merge_ranks(self.describe(), per_rank)
