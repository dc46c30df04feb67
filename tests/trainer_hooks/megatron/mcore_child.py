"""One rank of a 2-process megatron-core run over gloo (driven by the tests beside it).

Usage: mcore_child.py SCENARIO RANK STORE_FILE OUT_DIR [WORLD]

- ``dp``: DP=2 with the DistributedOptimizer (in a ChainedOptimizer): trained rows, a
  witness straddling the shard boundary, stale clearing everywhere, refusals, a
  dist_checkpointing round trip, and two hooked runs (clean, leaked retry) for the verifier.
- ``tp``: TP=2 with sequence parallelism (Float16OptimizerWithFloat16Params), then PP=2
  with two virtual chunks per stage for the checkpoint keys, then PP=2 through megatron's
  pipeline schedule (``get_forward_backward_func``, 1F1B with 2 micro-batches), the ids
  entered per micro-batch in ``forward_step_func``: hooked runs (clean, and with a
  discarded attempt applied) for the verifier. (One run: megatron's import is the cost.)
- ``tpdp`` (4 processes): TP=2 x DP=2 with the DistributedOptimizer: rows, clearing.

Each rank writes ``OUT_DIR/<scenario>_rank<RANK>.json``: facts measured on real tensors,
asserted on by the tests. Megatron runs on the CPU through the test-only ``cpu_compat``.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# megatron-core 0.16.1 warns at import time about what this CPU machine lacks (Transformer
# Engine, Apex) and about its own deprecated imports; nothing the tests check
warnings.filterwarnings("ignore", message=".*(Transformer Engine|Apex).*not installed.*")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit\._script")
warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"megatron\.core\..*")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from tests.trainer_hooks.megatron import cpu_compat  # noqa: E402

cpu_compat.enable()

from megatron.core import dist_checkpointing, parallel_state  # noqa: E402
from megatron.core.distributed import (  # noqa: E402
    DistributedDataParallel,
    DistributedDataParallelConfig,
    finalize_model_grads,
)
from megatron.core.models.gpt import GPTModel  # noqa: E402
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec  # noqa: E402
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer  # noqa: E402
from megatron.core.pipeline_parallel import get_forward_backward_func  # noqa: E402
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed  # noqa: E402
from megatron.core.transformer.module import Float16Module  # noqa: E402
from megatron.core.transformer.transformer_block import TransformerBlockSubmodules  # noqa: E402
from megatron.core.transformer.transformer_config import TransformerConfig  # noqa: E402

from ftaudit.trainer_hooks import DriverSession, ranks  # noqa: E402
from ftaudit.trainer_hooks.megatron import (  # noqa: E402
    MegatronWitnessClearer,
    MegatronWitnesses,
    UnsupportedMegatronSetupError,
    install_megatron_witnesses,
    megatron_state_hashes,
)
from ftaudit.trainer_hooks.torch import (  # noqa: E402
    TrainerHooks,
    UnsupportedOptimizerError,
    is_witness_name,
    sample_token_ids,
    without_witnesses,
)

SEQ, VOCAB, HIDDEN = 8, 64, 16
WORLD = int(sys.argv[5]) if len(sys.argv) > 5 else 2
"""Processes of this run: 2, or 4 for the TP=2 x DP=2 scenario."""


class SequenceParallelNorm(torch.nn.LayerNorm):
    """TEST ONLY: a torch LayerNorm that accepts sequence parallelism.

    megatron's local spec refuses ``sequence_parallel`` with torch norms (Transformer
    Engine's and Apex's are not installed here). With SP each rank normalises its part of
    the sequence, so the weight gradients are partial sums: marking the params
    ``sequence_parallel`` makes ``finalize_model_grads`` all-reduce them over TP, as
    megatron does for its own norms.
    """

    def __init__(self, config: TransformerConfig, hidden_size: int, eps: float = 1e-5) -> None:
        super().__init__(hidden_size, eps=eps)
        for param in self.parameters():
            param.sequence_parallel = config.sequence_parallel  # type: ignore[attr-defined]


@dataclass
class Trainer:
    """One rank's wrapped model chunks, optimizer and witnesses."""

    config: TransformerConfig
    chunks: list[torch.nn.Module]
    """The DDP-wrapped chunks (DDP(Float16Module(GPTModel)))."""
    gpts: list[GPTModel]
    optimizer: Any
    witnesses: MegatronWitnesses

    @property
    def model(self) -> torch.nn.Module:
        return self.chunks[0]

    def train(
        self, ids: list[list[int]], seed: int, step: bool = True, own_ids: bool = True
    ) -> None:
        """Forward+backward on a batch whose tokens carry ``ids`` [batch][seq]; then step.

        ``own_ids=False``: the caller gives the ids to the witnesses (``hooks.batch``).
        """
        for chunk in self.chunks:
            chunk.zero_grad_buffer()
        self.optimizer.zero_grad()
        token_ids = torch.tensor(ids, dtype=torch.long)
        gen = torch.Generator().manual_seed(seed)
        tokens = torch.randint(0, VOCAB, token_ids.shape, generator=gen)
        position = torch.arange(token_ids.shape[1]).unsqueeze(0).expand_as(tokens)
        mask = torch.triu(torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool), diagonal=1)
        with self.witnesses.tokens(token_ids) if own_ids else contextlib.nullcontext():
            loss = self.model(tokens, position, mask, labels=tokens)
            loss.float().mean().backward()
        finalize_model_grads(self.chunks)
        if step:
            ok, _, _ = self.optimizer.step()
            assert ok, "the optimizer step was skipped"

    def hashes(self, whole: bool = False) -> dict[str, str]:
        """The hooks' ``hasher``: Megatron's names hash local shards, no ``@whole`` digests."""
        return megatron_state_hashes(self.chunks, self.optimizer)


def build(
    buffer_size: int,
    *,
    seed: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    distributed_optimizer: bool = True,
    witnesses: bool = True,
    pp: int = 1,
    fsdp: bool = False,
    **extra: Any,
) -> Trainer:
    """A 2-layer bf16 GPTModel with witnesses, Float16Module, DDP and megatron's optimizer."""
    model_parallel_cuda_manual_seed(seed)
    torch.manual_seed(seed)
    config = TransformerConfig(
        num_layers=2,
        hidden_size=HIDDEN,
        num_attention_heads=2,
        use_cpu_initialization=True,
        bf16=True,
        params_dtype=torch.bfloat16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        tensor_model_parallel_size=tp,
        sequence_parallel=sequence_parallel,
        pipeline_model_parallel_size=pp,
        pipeline_dtype=torch.bfloat16 if pp > 1 else None,
        **extra,
    )
    layer: Any = get_gpt_layer_local_spec()
    if sequence_parallel:
        layer.submodules.input_layernorm = SequenceParallelNorm
        layer.submodules.pre_mlp_layernorm = SequenceParallelNorm
        layer = TransformerBlockSubmodules(
            layer_specs=[layer] * config.num_layers, layer_norm=SequenceParallelNorm
        )
    gpt = GPTModel(
        config=config,
        transformer_layer_spec=layer,
        vocab_size=VOCAB,
        max_sequence_length=SEQ,
        pre_process=parallel_state.is_pipeline_first_stage(),
        post_process=parallel_state.is_pipeline_last_stage(),
    )
    installed = install_megatron_witnesses(gpt, buffer_size) if witnesses else None
    ddp = DistributedDataParallel(
        config,
        DistributedDataParallelConfig(
            use_distributed_optimizer=distributed_optimizer,
            grad_reduce_in_fp32=True,
            bucket_size=None,
            use_megatron_fsdp=fsdp,
        ),
        Float16Module(config, gpt),
    )
    optimizer = get_megatron_optimizer(
        OptimizerConfig(
            optimizer="adam",
            lr=1e-2,
            bf16=True,
            use_distributed_optimizer=distributed_optimizer,
        ),
        [ddp],
    )
    return Trainer(config, [ddp], [gpt], optimizer, installed)  # type: ignore[arg-type]


def rows(tensor: torch.Tensor, offset: int = 0) -> list[int]:
    """The global rows of a (shard of a) witness that hold a nonzero value."""
    flat = tensor.detach().reshape(tensor.shape[0], -1).float()
    return [offset + int(i) for i in torch.nonzero(flat.abs().sum(dim=1)).reshape(-1)]


def adam_steps(trainer: Trainer) -> list[str]:
    """The distinct Adam ``step`` values (with their type) of this rank's inner optimizers."""
    found = set()
    for member in trainer.optimizer.chained_optimizers:
        for state in member.optimizer.state.values():
            value = state.get("step")
            found.add(
                repr(value)
                if not isinstance(value, torch.Tensor)
                else f"{value.dtype}{tuple(value.shape)}={value.item()}"
            )
    return sorted(found)


def snapshot(clearer: MegatronWitnessClearer) -> dict[str, list[int]]:
    return {name: runs.to_list() for name, runs in clearer.snapshot().items()}


def places(trainer: Trainer, clearer: MegatronWitnessClearer) -> dict[str, list[int]]:
    """Nonzero rows of every copy of each witness on this rank: param, main shard, moments."""
    out: dict[str, list[int]] = {}
    for name, witness in trainer.witnesses.instances().items():
        out[f"param/{name}"] = rows(witness.weight)
    for shard in clearer.shards():
        out[f"main/{shard.instance}"] = rows(shard.main.view(-1, 1), shard.offset)
        for key in ("exp_avg", "exp_avg_sq"):
            out[f"{key}/{shard.instance}"] = rows(shard.state[key].view(-1, 1), shard.offset)
    return out


@contextmanager
def timed(facts: dict[str, Any], name: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    facts.setdefault("seconds", {})[name] = round(time.perf_counter() - start, 2)


# -- DP=2, DistributedOptimizer ------------------------------------------------------------

B_DP = 6000
"""With this B the head witness of the 2-layer model is split between the two DP ranks."""


def dp_rows_and_clearing(rank: int, facts: dict[str, Any], ckpt_dir: Path) -> None:
    trainer = build(B_DP, seed=1)
    clearer = MegatronWitnessClearer(trainer.witnesses, trainer.optimizer)
    facts["optimizer"] = type(trainer.optimizer).__name__
    facts["members"] = [type(m).__name__ for m in clearer.members]
    facts["shards"] = [[s.instance, s.offset, s.main.numel()] for s in clearer.shards()]

    # the boundary: rank 1's first row of a witness it holds only in part
    shards = [None] * WORLD
    dist.all_gather_object(shards, facts["shards"])
    split = sorted({(n, o) for part in shards for n, o, c in part if 0 < o})  # type: ignore[union-attr]
    assert split, f"no witness straddles the shard boundary: {shards}"
    boundary = split[0][1]
    facts["boundary"] = [split[0][0], boundary]

    # step 1: rank 0 trains the rows just below the boundary and row 0, rank 1 the
    # boundary row and the last row (every token of a sample carries its id)
    trained = [[boundary - 1, 0], [boundary, B_DP - 1]]
    trainer.train([[i] * SEQ for i in trained[rank]], seed=10 + rank)
    facts["trained"] = sorted(i for part in trained for i in part)
    facts["step1"] = snapshot(clearer)
    facts["step1_places"] = places(trainer, clearer)

    # clear rows on both sides of the boundary and row 0
    stale = [0, boundary - 1, boundary]
    facts["stale"] = stale
    clearer.zero(stale)
    facts["cleared_places"] = places(trainer, clearer)

    # control: row B-1 zeroed in the model param and main shard only (the moments kept)
    for shard in clearer.shards():
        local = B_DP - 1 - shard.offset
        if 0 <= local < shard.main.numel():
            with torch.no_grad():
                shard.main[local] = 0
    for witness in trainer.witnesses.instances().values():
        with torch.no_grad():
            witness.weight[B_DP - 1] = 0
    facts["control_zeroed"] = snapshot(clearer)

    # step 2 trains other rows: cleared rows stay zero (their moments were cleared too),
    # the control row comes back from its momentum
    second = [[100], [200]]
    trainer.train([[i] * SEQ for i in second[rank]], seed=20 + rank)
    facts["step2"] = snapshot(clearer)
    facts["step2_places"] = places(trainer, clearer)

    # checkpoint round trip through dist_checkpointing (model + distributed optimizer)
    facts["checkpoint"] = checkpoint_round_trip(trainer, clearer, ckpt_dir)


CKPT_METADATA = {"distrib_optim_sharding_type": "dp_reshardable"}
"""The distributed optimizer's checkpoint format that Megatron-LM's training uses by default
(the older ``fully_sharded_model_space`` is refused by megatron-core 0.16.1's own checks)."""


def checkpoint_round_trip(
    trainer: Trainer, clearer: MegatronWitnessClearer, ckpt_dir: Path
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    model_sd = trainer.gpts[0].sharded_state_dict()
    out["witness_keys"] = sorted(k for k in model_sd if is_witness_name(k))
    out["export_witness_keys"] = sorted(
        k for k in without_witnesses(trainer.gpts[0].state_dict()) if is_witness_name(k)
    )
    state = {
        "model": model_sd,
        "optimizer": trainer.optimizer.sharded_state_dict(model_sd, metadata=CKPT_METADATA),
    }
    ckpt_dir.mkdir(exist_ok=True)  # dist_checkpointing saves into an existing, empty folder
    dist.barrier()
    dist_checkpointing.save(state, str(ckpt_dir))
    before = trainer.hashes()
    out["hashed_witnesses"] = sorted(k for k in before if is_witness_name(k.split("/", 1)[1]))

    fresh = build(B_DP, seed=7)  # other initial weights, empty witnesses and moments
    fresh_clearer = MegatronWitnessClearer(fresh.witnesses, fresh.optimizer)
    out["fresh_before_load"] = snapshot(fresh_clearer)
    # without Apex/Transformer Engine, DistributedOptimizer.state_dict() needs Adam's "step"
    # in the inner state, which a never-stepped optimizer lacks: fill it the way megatron
    # does itself before loading its fsdp_dtensor format (the values are overwritten)
    for member in fresh.optimizer.chained_optimizers:
        member._init_optimizer_states_with_dummy_values()
    fresh_sd = fresh.gpts[0].sharded_state_dict()
    load_sd = {
        "model": fresh_sd,
        "optimizer": fresh.optimizer.sharded_state_dict(
            fresh_sd, is_loading=True, metadata=CKPT_METADATA
        ),
    }
    loaded = dist_checkpointing.load(load_sd, str(ckpt_dir))
    fresh.gpts[0].load_state_dict(loaded["model"])
    fresh.optimizer.load_state_dict(loaded["optimizer"])
    after = fresh.hashes()
    out["adam_steps"] = [adam_steps(trainer), adam_steps(fresh)]
    out["differing_hashes"] = sorted(k for k in before if before[k] != after.get(k))
    out["missing_hashes"] = sorted(set(before) ^ set(after))
    out["loaded_snapshot"] = snapshot(fresh_clearer)
    out["saved_snapshot"] = snapshot(clearer)
    # the restored optimizer keeps clearing: zero one more row, step, it stays zero
    fresh_clearer.zero([100])
    fresh.train([[300] * SEQ], seed=30)
    out["after_load_step"] = snapshot(fresh_clearer)
    return out


def dp_refusals(facts: dict[str, Any]) -> None:
    plain = build(64, seed=2)
    torch_adam = torch.optim.Adam(plain.gpts[0].parameters())
    try:
        MegatronWitnessClearer(plain.witnesses, torch_adam)
    except UnsupportedOptimizerError as err:
        facts["refused_torch_adam"] = str(err)
    # an optimizer built before the witnesses were installed does not hold their rows
    late = build(64, seed=2, witnesses=False)
    late_witnesses = install_megatron_witnesses(late.gpts[0], 64)
    try:
        MegatronWitnessClearer(late_witnesses, late.optimizer).snapshot()
    except UnsupportedOptimizerError as err:
        facts["refused_late_install"] = str(err)
    # CUDA graphs: refused when the witnesses are installed (Transformer Engine's graphs
    # build on the CPU; megatron's own "local" ones need CUDA's RNG tracker)
    try:
        build(64, seed=2, cuda_graph_impl="transformer_engine")
    except UnsupportedMegatronSetupError as err:
        facts["refused_cuda_graphs"] = str(err)
    # Megatron-FSDP's DistributedOptimizer (megatron builds it from the DDP config; the
    # FSDP model wrapper itself needs CUDA): refused when the clearer is built
    fsdp = build(64, seed=2, fsdp=True)
    facts["fsdp_optimizer_has_groups"] = hasattr(
        fsdp.optimizer.chained_optimizers[0]
        if hasattr(fsdp.optimizer, "chained_optimizers")
        else fsdp.optimizer,
        "model_float16_groups",
    )
    try:
        MegatronWitnessClearer(fsdp.witnesses, fsdp.optimizer)
    except UnsupportedMegatronSetupError as err:
        facts["refused_megatron_fsdp"] = str(err)


def dp_hooked_run(rank: int, run_dir: Path, leak: bool) -> dict[str, Any]:
    """Three steps through TrainerHooks; step 1's attempt 0 is discarded (``leak``: applied).

    Rank 0 plays the driver: it allocates, sends each rank its half of the ids, and
    decides each attempt from both ranks' outcomes.
    """
    buffer_size, batch = 64, 4
    driver = None
    if rank == 0:
        driver = DriverSession.start(
            run_dir, buffer_size=buffer_size, dataset_size=1000, deterministic_order=True
        )
    dist.barrier()
    trainer = build(buffer_size, seed=3)
    clearer = MegatronWitnessClearer(trainer.witnesses, trainer.optimizer)
    hooks = TrainerHooks.attach(
        run_dir,
        0,
        cell=0,
        rank=rank,
        model=trainer.model,
        optimizer=trainer.optimizer,
        witnesses=trainer.witnesses,
        clearer=clearer,
        hasher=trainer.hashes,
    )
    out: dict[str, Any] = {"allocated": [], "snapshots": []}
    for step in range(3):
        attempt = 0
        while True:
            message: list[Any] = [None]
            if driver is not None:
                info = driver.allocate(step, attempt, range(step * batch, (step + 1) * batch))
                message = [(info.witness_ids, info.stale_ids)]
            dist.broadcast_object_list(message, src=0)
            ids, stale = message[0]
            out["allocated"].append([step, attempt, ids])
            half = ids[rank * batch // WORLD : (rank + 1) * batch // WORLD]
            discard = step == 1 and attempt == 0
            with hooks.step(step, attempt):
                with hooks.batch(sample_token_ids(half, SEQ)):
                    trainer.train(
                        sample_token_ids(half, SEQ).tolist(),
                        seed=100 * step + 10 * attempt + rank,
                        step=not discard or leak,  # the bug: a discarded attempt is applied
                        own_ids=False,
                    )
                if discard:
                    outcome = "discarded_should_retry"
                else:
                    snap = hooks.after_optimizer_step(stale, checksum=True)
                    out["snapshots"].append(
                        [step, attempt, {k: v.to_list() for k, v in snap.items()}]
                    )
                    outcome = "normal"
            outcomes: list[Any] = [None] * WORLD
            dist.all_gather_object(outcomes, outcome)
            decision = [False]
            if driver is not None:
                decision = [driver.end_attempt(step, attempt, {0: ranks(*outcomes)})]
            dist.broadcast_object_list(decision, src=0)
            if decision[0]:
                break
            attempt += 1
    hooks.close()
    dist.barrier()
    if driver is not None:
        driver.finish()
    return out


def scenario_dp(rank: int, out_dir: Path) -> dict[str, Any]:
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    facts: dict[str, Any] = {}
    with timed(facts, "rows_clearing_checkpoint"):
        dp_rows_and_clearing(rank, facts, out_dir / "ckpt")
    with timed(facts, "refusals"):
        dp_refusals(facts)
    with timed(facts, "hooked_runs"):
        facts["clean_run"] = dp_hooked_run(rank, out_dir / "run_clean", leak=False)
        facts["leaked_run"] = dp_hooked_run(rank, out_dir / "run_leak", leak=True)
    return facts


# -- TP=2 with sequence parallelism, then PP=2 with virtual chunks --------------------------


def tp_sequence_parallel(rank: int, facts: dict[str, Any]) -> None:
    buffer_size = 32
    trainer = build(buffer_size, seed=4, tp=2, sequence_parallel=True, distributed_optimizer=False)
    clearer = MegatronWitnessClearer(trainer.witnesses, trainer.optimizer)
    facts["members"] = [type(m).__name__ for m in clearer.members]
    facts["hidden_tokens_per_rank"] = SEQ // 2
    # packed: two samples per sequence, so the first half of the sequence (TP rank 0's
    # part under SP) holds other samples than the second half (rank 1's)
    ids = [[1] * (SEQ // 2) + [2] * (SEQ // 2), [3] * (SEQ // 2) + [4] * (SEQ // 2)]
    facts["trained"] = [1, 2, 3, 4]
    trainer.train(ids, seed=40)  # both TP ranks see the same batch
    facts["step1"] = snapshot(clearer)
    main_rows = {s.instance: s.main.detach().clone() for s in clearer.shards()}
    gathered: list[Any] = [None] * WORLD
    dist.all_gather_object(gathered, {k: v.tolist() for k, v in main_rows.items()})
    facts["main_equal_across_tp"] = gathered[0] == gathered[1]
    facts["stale"] = [2, 3]
    clearer.zero([2, 3])
    facts["cleared_places"] = places(trainer, clearer)
    trainer.train([[5] * SEQ, [6] * SEQ], seed=41)
    facts["step2"] = snapshot(clearer)
    norm = trainer.gpts[0].decoder.layers[0].input_layernorm.weight
    gathered = [None] * WORLD
    dist.all_gather_object(gathered, norm.detach().float().tolist())
    facts["norm_equal_across_tp"] = gathered[0] == gathered[1]


def pp_checkpoint_keys(facts: dict[str, Any]) -> None:
    """PP=2 with 2 virtual chunks per stage: witness keys unique per stage and chunk."""
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(
        pipeline_model_parallel_size=2, virtual_pipeline_model_parallel_size=2
    )
    model_parallel_cuda_manual_seed(5)
    config = TransformerConfig(
        num_layers=4,
        hidden_size=HIDDEN,
        num_attention_heads=2,
        use_cpu_initialization=True,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        pipeline_model_parallel_size=2,
        virtual_pipeline_model_parallel_size=2,
        pipeline_dtype=torch.float32,
    )
    chunks = []
    for vp in range(2):
        chunks.append(
            GPTModel(
                config=config,
                transformer_layer_spec=get_gpt_layer_local_spec(),
                vocab_size=VOCAB,
                max_sequence_length=SEQ,
                pre_process=parallel_state.is_pipeline_first_stage(
                    ignore_virtual=False, vp_stage=vp
                ),
                post_process=parallel_state.is_pipeline_last_stage(
                    ignore_virtual=False, vp_stage=vp
                ),
                vp_stage=vp,
            )
        )
    witnesses = install_megatron_witnesses(chunks, 16)
    facts["pp_instances"] = sorted(witnesses.instances())
    # the global checkpoint keys (ShardedTensor.key; the dict keys are local names)
    facts["pp_witness_keys"] = [
        [value.key for name, value in chunk.sharded_state_dict().items() if is_witness_name(name)]
        for chunk in chunks
    ]
    facts["pp_all_keys"] = sorted(
        value.key for chunk in chunks for value in chunk.sharded_state_dict().values()
    )


def scenario_tp(rank: int, out_dir: Path) -> dict[str, Any]:
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
    facts: dict[str, Any] = {}
    with timed(facts, "tp_sequence_parallel"):
        tp_sequence_parallel(rank, facts)
    with timed(facts, "pp_checkpoint_keys"):
        pp_checkpoint_keys(facts)
    with timed(facts, "pp_schedule"):
        pp_schedule(rank, facts, out_dir)
    return facts


# -- PP=2 through megatron's pipeline schedule ----------------------------------------------

MICRO, MICRO_BATCH = 2, 2
"""Micro-batches per step and samples per micro-batch of the pipelined runs."""


def pp_forward_backward(
    trainer: Trainer, hooks: TrainerHooks, micro: list[list[int]], seed: int
) -> dict[str, Any]:
    """One pipelined forward+backward (1F1B) over the micro-batches of sample ids ``micro``.

    The witness ids of each micro-batch are entered in ``forward_step_func`` around that
    micro-batch's forward only; the schedule runs its backward later, outside.
    """
    for chunk in trainer.chunks:
        chunk.zero_grad_buffer()
    trainer.optimizer.zero_grad()
    gen = torch.Generator().manual_seed(seed)
    batches = [
        (torch.randint(0, VOCAB, (len(ids), SEQ), generator=gen), sample_token_ids(ids, SEQ))
        for ids in micro
    ]
    position = torch.arange(SEQ).unsqueeze(0).expand(MICRO_BATCH, SEQ)
    mask = torch.triu(torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool), diagonal=1)
    seen: list[list[int]] = []

    def forward_step(data_iterator: Iterator[Any], model: torch.nn.Module) -> Any:
        tokens, token_ids = next(data_iterator)
        seen.append(sorted(set(token_ids.reshape(-1).tolist())))
        with hooks.batch(token_ids):
            output = model(tokens, position, mask, labels=tokens)

        def loss_func(output_tensor: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
            loss = output_tensor.float().mean()
            return loss, {"loss": loss.detach()}

        return output, loss_func

    get_forward_backward_func()(
        forward_step_func=forward_step,
        data_iterator=iter(batches),
        model=trainer.chunks,
        num_microbatches=len(batches),
        seq_length=SEQ,
        micro_batch_size=MICRO_BATCH,
        forward_only=False,
    )
    return {"forward_ids": seen}


def pp_hooked_run(rank: int, run_dir: Path, leak: bool) -> dict[str, Any]:
    """Three pipelined steps through TrainerHooks; step 1's attempt 0 is discarded
    (``leak``: its optimizer step is applied anyway). Rank 0 (stage 0) plays the driver."""
    buffer_size, batch = 64, MICRO * MICRO_BATCH
    driver = None
    if rank == 0:
        driver = DriverSession.start(
            run_dir, buffer_size=buffer_size, dataset_size=1000, deterministic_order=True
        )
    dist.barrier()
    trainer = build(buffer_size, seed=6, pp=2)
    trainer.config.finalize_model_grads_func = finalize_model_grads
    clearer = MegatronWitnessClearer(trainer.witnesses, trainer.optimizer)
    hooks = TrainerHooks.attach(
        run_dir,
        0,
        cell=0,
        rank=rank,
        model=trainer.model,
        optimizer=trainer.optimizer,
        witnesses=trainer.witnesses,
        clearer=clearer,
        hasher=trainer.hashes,
    )
    out: dict[str, Any] = {"instances": sorted(trainer.witnesses.instances())}
    out.update(allocated=[], snapshots=[], forward_ids=[])
    for step in range(3):
        attempt = 0
        while True:
            message: list[Any] = [None]
            if driver is not None:
                info = driver.allocate(step, attempt, range(step * batch, (step + 1) * batch))
                message = [(info.witness_ids, info.stale_ids)]
            dist.broadcast_object_list(message, src=0)
            ids, stale = message[0]
            out["allocated"].append([step, attempt, ids])
            micro = [ids[i * MICRO_BATCH : (i + 1) * MICRO_BATCH] for i in range(MICRO)]
            discard = step == 1 and attempt == 0
            with hooks.step(step, attempt):
                seen = pp_forward_backward(trainer, hooks, micro, seed=100 * step + attempt)
                out["forward_ids"].append([step, attempt, seen["forward_ids"]])
                if not discard or leak:  # the bug: a discarded attempt is applied
                    ok, _, _ = trainer.optimizer.step()
                    assert ok, "the optimizer step was skipped"
                if discard:
                    outcome = "discarded_should_retry"
                else:
                    snap = hooks.after_optimizer_step(stale, checksum=True)
                    out["snapshots"].append(
                        [step, attempt, {k: v.to_list() for k, v in snap.items()}]
                    )
                    outcome = "normal"
            outcomes: list[Any] = [None] * WORLD
            dist.all_gather_object(outcomes, outcome)
            decision = [False]
            if driver is not None:
                decision = [driver.end_attempt(step, attempt, {0: ranks(*outcomes)})]
            dist.broadcast_object_list(decision, src=0)
            if decision[0]:
                break
            attempt += 1
    hooks.close()
    dist.barrier()
    if driver is not None:
        driver.finish()
    return out


def pp_schedule(rank: int, facts: dict[str, Any], out_dir: Path) -> None:
    """PP=2 (no virtual chunks) through the schedule: a clean and a leaked hooked run."""
    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(pipeline_model_parallel_size=2)
    facts["stage"] = parallel_state.get_pipeline_model_parallel_rank()
    facts["clean_run"] = pp_hooked_run(rank, out_dir / "run_clean", leak=False)
    facts["leaked_run"] = pp_hooked_run(rank, out_dir / "run_leak", leak=True)


# -- TP=2 x DP=2 with the DistributedOptimizer (4 processes) --------------------------------

B_TPDP = 6000
"""With this B a witness of the TP=2 model is split between the two DP ranks' shards."""


def scenario_tpdp(rank: int, out_dir: Path) -> dict[str, Any]:
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=2)
    dp_rank = parallel_state.get_data_parallel_rank()
    facts: dict[str, Any] = {
        "tp_rank": parallel_state.get_tensor_model_parallel_rank(),
        "dp_rank": dp_rank,
        "dp_size": parallel_state.get_data_parallel_world_size(),
    }
    with timed(facts, "rows_clearing"):
        trainer = build(B_TPDP, seed=8, tp=2)
        clearer = MegatronWitnessClearer(trainer.witnesses, trainer.optimizer)
        facts["members"] = [type(m).__name__ for m in clearer.members]
        facts["shards"] = [[s.instance, s.offset, s.main.numel()] for s in clearer.shards()]
        everyone: list[Any] = [None] * WORLD
        dist.all_gather_object(everyone, facts["shards"])
        split = sorted({(n, o) for part in everyone for n, o, _ in part if 0 < o})
        assert split, f"no witness straddles a DP shard boundary: {everyone}"
        boundary = split[0][1]
        facts["boundary"] = [split[0][0], boundary]
        # both TP ranks of a DP rank train the same samples; the two DP ranks train rows
        # on either side of the boundary (and the first and last row)
        trained = [[boundary - 1, 0], [boundary, B_TPDP - 1]]
        trainer.train([[i] * SEQ for i in trained[dp_rank]], seed=50 + dp_rank)
        facts["trained"] = sorted(i for part in trained for i in part)
        facts["step1"] = snapshot(clearer)
        facts["stale"] = [0, boundary - 1, boundary]
        clearer.zero(facts["stale"])
        facts["cleared_places"] = places(trainer, clearer)
        trainer.train([[100 + dp_rank] * SEQ], seed=60 + dp_rank)
        facts["step2"] = snapshot(clearer)
    return facts


SCENARIOS: dict[str, Callable[[int, Path], dict[str, Any]]] = {
    "dp": scenario_dp,
    "tp": scenario_tp,
    "tpdp": scenario_tpdp,
}


def main() -> None:
    scenario, rank, store, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    facts = SCENARIOS[scenario](rank, out_dir)
    (out_dir / f"{scenario}_rank{rank}.json").write_text(json.dumps(facts))
    dist.barrier()
    parallel_state.destroy_model_parallel()
    gc.collect()  # the scenario's wrapped models hold the groups: see examples/torchrun_ddp.py
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
