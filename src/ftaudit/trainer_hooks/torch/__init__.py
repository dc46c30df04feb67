"""The torch side of the hooks: the witness in the model, clearing, checksums, the worker.

This is the only part of ftaudit's core that imports torch.
"""

from ftaudit.trainer_hooks.torch.cells import CellMap
from ftaudit.trainer_hooks.torch.checksums import state_hashes, tensor_hash
from ftaudit.trainer_hooks.torch.clearing import (
    UnsupportedOptimizerError,
    WitnessClearer,
    nonzero_rows,
    row_state_keys,
)
from ftaudit.trainer_hooks.torch.distributed import DistributedRun
from ftaudit.trainer_hooks.torch.loader import SamplerStream
from ftaudit.trainer_hooks.torch.witness import (
    WITNESS_MODULE,
    WitnessEmbedding,
    WitnessSet,
    find_witnesses,
    install_witnesses,
    is_witness_name,
    packed_token_ids,
    sample_token_ids,
    without_witnesses,
)
from ftaudit.trainer_hooks.torch.worker import TrainerHooks, advantage_summary

__all__ = [
    "WITNESS_MODULE",
    "CellMap",
    "DistributedRun",
    "SamplerStream",
    "TrainerHooks",
    "UnsupportedOptimizerError",
    "WitnessClearer",
    "WitnessEmbedding",
    "WitnessSet",
    "advantage_summary",
    "find_witnesses",
    "install_witnesses",
    "is_witness_name",
    "nonzero_rows",
    "packed_token_ids",
    "row_state_keys",
    "sample_token_ids",
    "state_hashes",
    "tensor_hash",
    "without_witnesses",
]
