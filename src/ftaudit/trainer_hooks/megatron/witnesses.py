"""Head and tail witnesses in Megatron-core GPT models, on every pipeline stage and chunk.

Nothing of Megatron is forked: the witnesses are hooked on the first and last layer of
each model chunk's ``decoder.layers`` (hidden states [seq, batch, hidden]) and registered
on the chunk as ``ftaudit_witness``, so Megatron's DDP, optimizers and
``sharded_state_dict`` see them as ordinary replicated parameters. Instances are named
``pp{pipeline rank}_chunk{virtual chunk}.head|tail``, which keeps checkpoint keys
(``ftaudit_witness.pp1_chunk0.head.weight``) unique per pipeline stage.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import torch
from megatron.core import parallel_state, tensor_parallel
from torch import nn

from ftaudit.errors import UsageError
from ftaudit.trainer_hooks.megatron.support import refuse_cuda_graphs
from ftaudit.trainer_hooks.torch.witness import (
    WITNESS_MODULE,
    TokenRegion,
    WitnessEmbedding,
    WitnessSet,
)


class MegatronWitnesses:
    """The witness sets of a model's chunks, with one ids context for all of them."""

    def __init__(self, sets: Sequence[WitnessSet]) -> None:
        self.sets = list(sets)
        self.buffer_size = self.sets[0].buffer_size

    def instances(self) -> dict[str, WitnessEmbedding]:
        """Every witness of this rank by instance name (``pp0_chunk1.tail``)."""
        out: dict[str, WitnessEmbedding] = {}
        for witnesses in self.sets:
            out.update(witnesses.instances())
        return out

    @contextmanager
    def tokens(self, ids: torch.Tensor) -> Iterator[torch.Tensor]:
        """Witness ids [batch, seq] of the micro-batch for forwards (and backwards) inside.

        With sequence parallelism give the ids of the whole sequence; each rank's
        witness takes its part. Keep the backward inside with activation recompute.
        """
        with ExitStack() as stack:
            for witnesses in self.sets:
                stack.enter_context(witnesses.tokens(ids))
            yield ids

    def detach_hooks(self) -> None:
        for witnesses in self.sets:
            witnesses.detach_hooks()


def _layers(chunk: nn.Module, index: int) -> nn.ModuleList:
    decoder = getattr(chunk, "decoder", None)
    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, nn.ModuleList):
        raise TypeError(
            f"model chunk {index} ({type(chunk).__name__}) has no decoder.layers: install the "
            "witnesses on the GPTModel chunks before wrapping them (Float16Module, DDP)"
        )
    if len(layers) == 0:
        raise UsageError(f"model chunk {index} has no transformer layers on this pipeline stage")
    return layers


def install_megatron_witnesses(
    model: nn.Module | Sequence[nn.Module],
    buffer_size: int,
    *,
    dtype: torch.dtype = torch.float32,
) -> MegatronWitnesses:
    """Put a head and a tail witness on every model chunk of this pipeline stage.

    ``model`` is the GPTModel, or the list of virtual-pipeline chunks, as built for this
    rank (``parallel_state`` initialised). Call it before ``Float16Module``, DDP and the
    optimizer (a later ``Float16Module`` turns the witness rows into bf16 like every
    parameter; the distributed optimizer then keeps their fp32 main copy). A chunk
    configured for CUDA graphs is refused (:mod:`ftaudit.trainer_hooks.megatron.support`).
    """
    chunks = [model] if isinstance(model, nn.Module) else list(model)
    if not chunks:
        raise UsageError("no model chunks given")
    pp_rank = parallel_state.get_pipeline_model_parallel_rank()
    sets = []
    for index, chunk in enumerate(chunks):
        if hasattr(chunk, WITNESS_MODULE):
            raise UsageError(f"model chunk {index} already has witnesses installed")
        layers = _layers(chunk, index)
        config = getattr(chunk, "config", None)
        refuse_cuda_graphs(config, f"model chunk {index}")
        region: TokenRegion | None = None
        if getattr(config, "sequence_parallel", False):
            region = tensor_parallel.scatter_to_sequence_parallel_region
        device = next(layers[0].parameters()).device
        witnesses = WitnessSet(buffer_size)
        name = f"pp{pp_rank}_chunk{index}"
        for end, layer, at in (("head", layers[0], "input"), ("tail", layers[-1], "output")):
            witnesses.attach(
                layer,
                f"{name}.{end}",
                at=at,  # type: ignore[arg-type]
                layout="sbh",
                device=device,
                dtype=dtype,
                region=region,
            )
        chunk.add_module(WITNESS_MODULE, witnesses)
        sets.append(witnesses)
    return MegatronWitnesses(sets)
