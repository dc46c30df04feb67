"""What the Megatron integration refuses up front: layouts where witnesses cannot work.

Invariant: a Megatron setup in which the witness hooks would never run, or whose
optimizer keeps no per-parameter main copies to read the rows from, is refused with a
clear error when the witnesses are installed or the clearer is built, before the first
step, never by a wrong verdict after training.

- **CUDA graphs** (``cuda_graph_impl`` ``"local"`` or ``"transformer_engine"``, or the
  deprecated ``enable_cuda_graph``/``external_cuda_graph``): a replayed graph runs the
  captured kernels without calling ``nn.Module.__call__``, so the witnesses' forward hooks
  never run and FT004 would report every id as missing.
- **Megatron-FSDP** (``use_megatron_fsdp``, or the deprecated ``use_custom_fsdp``): its
  ``DistributedOptimizer`` returns before building the per-group lists of model params and
  fp32 main shards, so the witness rows can be neither read nor cleared.
"""

from __future__ import annotations

from typing import Any

from ftaudit.errors import (
    UnsupportedMegatronSetupError,
)

CUDA_GRAPH_FLAGS = ("enable_cuda_graph", "external_cuda_graph")
FSDP_FLAGS = ("use_megatron_fsdp", "use_custom_fsdp")


def refuse_cuda_graphs(config: Any, where: str) -> None:
    """Raise if the ``TransformerConfig`` ``config`` captures CUDA graphs."""
    impl = getattr(config, "cuda_graph_impl", "none")
    flags = [flag for flag in CUDA_GRAPH_FLAGS if getattr(config, flag, False)]
    if impl not in (None, "none") or flags:
        setting = f"cuda_graph_impl={impl!r}" + "".join(f", {f}=True" for f in flags)
        raise UnsupportedMegatronSetupError(
            f"{where}: CUDA graphs ({setting}) are not supported: a replayed graph skips "
            "nn.Module.__call__, so the witness hooks never run and FT004 would report every "
            "id as missing; train with cuda_graph_impl='none'"
        )


def refuse_megatron_fsdp(ddp_config: Any, where: str) -> None:
    """Raise if the ``DistributedDataParallelConfig`` ``ddp_config`` selects Megatron-FSDP."""
    flags = [flag for flag in FSDP_FLAGS if getattr(ddp_config, flag, False)]
    if flags:
        raise UnsupportedMegatronSetupError(
            f"{where}: Megatron-FSDP ({', '.join(f'{f}=True' for f in flags)}) is not "
            "supported: its DistributedOptimizer keeps no per-group model params and fp32 "
            "main shards, so witness rows can be neither read nor cleared; use megatron's "
            "DistributedDataParallel with the DistributedOptimizer"
        )
