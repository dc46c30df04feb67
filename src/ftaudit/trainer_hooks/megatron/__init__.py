"""Megatron-core integration: witnesses in GPT models, rows through Megatron's optimizers.

Imports megatron-core (extra ``megatron``, pinned ``megatron-core==0.16.1``) and torch.

- :func:`install_megatron_witnesses` puts head and tail witnesses on every pipeline
  stage and virtual chunk; with sequence parallelism each witness's per-token tensor is
  scattered to the sequence-parallel region.
- :class:`MegatronWitnessClearer` reads the rows from the fp32 main params (shard
  offsets mapped to global rows) and clears stale rows in the param, the main-param
  shard and Adam's moments; pass it to ``TrainerHooks(..., clearer=...)``.
- Refused up front with :class:`UnsupportedMegatronSetupError`: CUDA graphs (the witness
  hooks would never run) and Megatron-FSDP (no main-param groups to read rows from).
- :func:`megatron_state_hashes` for weight checksums (witnesses included); exclude
  witnesses from weight export with :func:`ftaudit.trainer_hooks.torch.is_witness_name`.
"""

from ftaudit.trainer_hooks.megatron.checksums import megatron_state_hashes
from ftaudit.trainer_hooks.megatron.clearing import (
    FUSED_ADAM_KEYS,
    MegatronWitnessClearer,
    RowShard,
)
from ftaudit.trainer_hooks.megatron.support import UnsupportedMegatronSetupError
from ftaudit.trainer_hooks.megatron.witnesses import MegatronWitnesses, install_megatron_witnesses

__all__ = [
    "FUSED_ADAM_KEYS",
    "MegatronWitnessClearer",
    "MegatronWitnesses",
    "RowShard",
    "UnsupportedMegatronSetupError",
    "install_megatron_witnesses",
    "megatron_state_hashes",
]
