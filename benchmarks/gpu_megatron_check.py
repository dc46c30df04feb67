"""Megatron-core witness checks on CUDA (no compatibility layer), and the witness's cost.

The GPU check of issue 7 (never part of CI). Needs megatron-core==0.16.1 and torch on a
CUDA machine (carry the megatron-core wheel for the machine's Python). One process per
GPU; with 2 or more GPUs it also checks a witness straddling a DistributedOptimizer shard:

    python benchmarks/gpu_megatron_check.py                       # 1 GPU: 8 layers, hidden 2048
    torchrun --nproc-per-node 2 benchmarks/gpu_megatron_check.py  # DP=2: + the straddle check
    python benchmarks/gpu_megatron_check.py --cpu-compat --layers 2 --hidden 64 --seq 32 \
        --batch 2 --buffer 6000 --repeats 2                        # smoke test of this script

``--cpu-compat`` runs it on the CPU through the tests' compatibility layer
(``tests/trainer_hooks/megatron/cpu_compat.py``): only to check the script itself.

Checks (PASS/FAIL each; exit status 1 if any fails), bf16 GPTModel (local layer spec),
Float16Module, megatron DDP and get_megatron_optimizer (DistributedOptimizer inside a
ChainedOptimizer):
  forward bitwise equal without and with witness ids, same model and grad mode, with the
  witness proven engaged (its gradient reaches the ids' rows), at zero and nonzero rows;
  every other gradient bitwise equal with and without witness ids;
  after one step exactly the trained rows are nonzero, on every rank, read from the fp32
  main params; with DP >= 2 some witness is split between ranks and rows on both sides
  of the split are reported by every rank;
  stale clearing zeroes param, main-param shard, exp_avg and exp_avg_sq, and the rows stay
  zero after a further step.
Timing: median forward+backward time without and with witness ids (default kernels and
deterministic ones), and the time of one snapshot (rows of B read and exchanged as runs).
Prints one JSON line with the figures, versions and the device at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")  # what megatron expects

import torch
import torch.distributed as dist

RESULTS: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    RESULTS.append((name, ok, detail))
    if int(os.environ.get("RANK", "0")) == 0 or not ok:
        print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4, help="micro-batch per rank")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--buffer", type=int, default=1 << 20, help="B, witness rows")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--cpu-compat", action="store_true", help="CPU smoke test (see above)")
    p.add_argument("--json", help="rank 0 also writes the results as JSON to this file")
    return p.parse_args()


def setup(args: argparse.Namespace) -> tuple[int, int]:
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    if args.cpu_compat:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.trainer_hooks.megatron import cpu_compat

        cpu_compat.enable()
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: this is the GPU check (use --cpu-compat for a smoke test)")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group("nccl", rank=rank, world_size=world)
    from megatron.core import parallel_state

    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)
    return rank, world


def build(args: argparse.Namespace, witnesses: bool = True) -> dict[str, Any]:
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    from ftaudit.trainer_hooks.megatron import MegatronWitnessClearer, install_megatron_witnesses

    torch.manual_seed(0)
    model_parallel_cuda_manual_seed(0)
    config = TransformerConfig(
        num_layers=args.layers,
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        bf16=True,
        params_dtype=torch.bfloat16,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        use_cpu_initialization=args.cpu_compat,
    )
    gpt = GPTModel(
        config=config,
        transformer_layer_spec=get_gpt_layer_local_spec(),
        vocab_size=args.vocab,
        max_sequence_length=args.seq,
    )
    installed = install_megatron_witnesses(gpt, args.buffer) if witnesses else None
    ddp = DistributedDataParallel(
        config,
        DistributedDataParallelConfig(use_distributed_optimizer=True, grad_reduce_in_fp32=True),
        Float16Module(config, gpt),
    )
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, use_distributed_optimizer=True),
        [ddp],
    )
    clearer = MegatronWitnessClearer(installed, optimizer) if installed else None
    return {"ddp": ddp, "gpt": gpt, "opt": optimizer, "witnesses": installed, "clearer": clearer}


def batch(args: argparse.Namespace, seed: int, rows: int) -> tuple[torch.Tensor, ...]:
    device = "cuda" if not args.cpu_compat else "cpu"
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, args.vocab, (rows, args.seq), generator=gen).to(device)
    position = torch.arange(args.seq, device=device).unsqueeze(0).expand_as(tokens)
    mask = torch.triu(
        torch.ones(1, 1, args.seq, args.seq, dtype=torch.bool, device=device), diagonal=1
    )
    return tokens, position, mask


def forward_backward(
    m: dict[str, Any], args: argparse.Namespace, ids: torch.Tensor | None, seed: int
) -> torch.Tensor:
    from megatron.core.distributed import finalize_model_grads

    m["ddp"].zero_grad_buffer()
    m["opt"].zero_grad()
    tokens, position, mask = batch(args, seed, args.batch if ids is None else ids.shape[0])
    if ids is None:
        out = m["ddp"](tokens, position, mask, labels=tokens)
        out.float().mean().backward()
    else:
        with m["witnesses"].tokens(ids):
            out = m["ddp"](tokens, position, mask, labels=tokens)
            out.float().mean().backward()
    finalize_model_grads([m["ddp"]])
    return out.detach()


def sample_ids(values: list[int], seq: int) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long).reshape(-1, 1).expand(-1, seq)


def grads(m: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {
        name: p.main_grad.detach().clone()
        for name, p in m["gpt"].named_parameters()
        if "ftaudit_witness" not in name and getattr(p, "main_grad", None) is not None
    }


def nonzero(t: torch.Tensor, offset: int = 0) -> list[int]:
    flat = t.detach().reshape(t.shape[0], -1).float().abs().sum(dim=1)
    return [offset + int(i) for i in torch.nonzero(flat).reshape(-1).cpu()]


def engaged(m: dict[str, Any], ids: torch.Tensor, world: int) -> bool:
    """The last backward reached the rows of this rank's ids in every witness's gradient.

    With one rank the rows are exactly the ids; with more, the gradient buffer after the
    reduce-scatter also holds other ranks' rows in this rank's shard.
    """
    own = set(ids.reshape(-1).tolist())
    for witness in m["witnesses"].instances().values():
        grad = getattr(witness.weight, "main_grad", None)
        rows = set(nonzero(grad)) if grad is not None else set()
        if not (rows == own if world == 1 else own <= rows):
            return False
    return True


def forward_unchanged(
    m: dict[str, Any], args: argparse.Namespace, ids: torch.Tensor, seed: int, world: int
) -> tuple[bool, str]:
    """Forward bitwise equal without and with ``ids`` (same model, same grad mode), and the
    witness engaged in the second: a check that could not see the witness fails."""
    torch.use_deterministic_algorithms(True)
    try:
        plain = forward_backward(m, args, None, seed=seed)
        witnessed = forward_backward(m, args, ids, seed=seed)
    finally:
        torch.use_deterministic_algorithms(False)
    hooked = engaged(m, ids, world)
    return torch.equal(plain, witnessed) and hooked, "" if hooked else "witness not engaged"


def checks(args: argparse.Namespace, rank: int, world: int) -> None:
    m = build(args)
    clearer = m["clearer"]
    b = args.buffer
    ids = sample_ids([(rank * args.batch + i) * 7 % b for i in range(args.batch)], args.seq)
    ok, detail = forward_unchanged(m, args, ids, seed=rank, world=world)
    check("forward bitwise equal with witness ids (zero rows)", ok, detail)
    torch.use_deterministic_algorithms(True)
    forward_backward(m, args, None, seed=rank)
    plain_grads = grads(m)
    forward_backward(m, args, ids, seed=rank)
    same = [n for n, g in grads(m).items() if not torch.equal(g, plain_grads[n])]
    check("other gradients bitwise equal with witness ids", not same, f"differ: {same[:3]}")
    torch.use_deterministic_algorithms(False)

    # rows: with DP >= 2 put samples on both sides of the first split witness
    shards = [[s.instance, s.offset, s.main.numel()] for s in clearer.shards()]
    everyone: list[Any] = [None] * world
    dist.all_gather_object(everyone, shards)
    split = sorted({o for part in everyone for _, o, _ in part if 0 < o})
    trained_all: list[list[int]] = [[3 + r, b - 1 - r] for r in range(world)]
    if split:
        trained_all[0][0] = split[0] - 1
        trained_all[-1][1] = split[0]
    check(
        "a witness straddles a shard boundary" if world > 1 else "one rank holds whole witnesses",
        bool(split) == (world > 1),
        f"shards {everyone}",
    )
    mine = trained_all[rank]
    trained = sorted({i for part in trained_all for i in part})
    forward_backward(m, args, sample_ids(mine, args.seq), seed=10 + rank)
    ok, _, _ = m["opt"].step()
    snap = {k: v.to_list() for k, v in clearer.snapshot().items()}
    check(
        "exactly the trained rows are nonzero (fp32 main params, all ranks)",
        ok and all(v == trained for v in snap.values()),
        f"trained {trained}, got {snap}",
    )
    ok, detail = forward_unchanged(m, args, ids, seed=5 + rank, world=world)
    check("forward bitwise equal with witness ids (nonzero rows)", ok, detail)
    stale = trained[:2]
    clearer.zero(stale)
    left = []
    for name, w in m["witnesses"].instances().items():
        left += [(f"param/{name}", i) for i in nonzero(w.weight) if i in stale]
    for s in clearer.shards():
        for key, t in (("main", s.main), *((k, s.state[k]) for k in ("exp_avg", "exp_avg_sq"))):
            left += [(f"{key}/{s.instance}", i) for i in nonzero(t.view(-1, 1), s.offset)]
    left = [x for x in left if x[1] in stale]
    check("stale clearing zeroes param, main shard, exp_avg, exp_avg_sq", not left, str(left))
    forward_backward(m, args, sample_ids([11 + rank], args.seq), seed=20 + rank)
    m["opt"].step()
    snap = {k: set(v.to_list()) for k, v in clearer.snapshot().items()}
    check(
        "cleared rows stay zero after the next step",
        all(not set(stale) & v for v in snap.values()),
        str({k: sorted(v)[:8] for k, v in snap.items()}),
    )
    del m


def timing(args: argparse.Namespace, rank: int, world: int) -> dict[str, Any]:
    m = build(args)
    sync: Callable[[], None] = torch.cuda.synchronize if not args.cpu_compat else lambda: None
    ids = sample_ids(list(range(rank * args.batch, (rank + 1) * args.batch)), args.seq)
    out: dict[str, Any] = {}
    for deterministic in (False, True):
        torch.use_deterministic_algorithms(deterministic)
        times: dict[str, list[float]] = {"without": [], "with": []}
        for i in range(args.repeats + 3):
            for key in ("without", "with"):  # interleaved, so drift hits both alike
                sync()
                start = time.perf_counter()
                forward_backward(m, args, None if key == "without" else ids, seed=i)
                sync()
                if i >= 3:  # warm-up
                    times[key].append(time.perf_counter() - start)
        base, wit = (statistics.median(times[k]) for k in ("without", "with"))
        label = "deterministic" if deterministic else "default"
        out[label] = {
            "fwd_bwd_ms_without": round(base * 1e3, 3),
            "fwd_bwd_ms_with": round(wit * 1e3, 3),
            "overhead_pct": round(100 * (wit - base) / base, 2),
        }
    torch.use_deterministic_algorithms(False)
    m["opt"].step()
    snaps = []
    for _ in range(max(args.repeats, 3)):
        sync()
        start = time.perf_counter()
        m["clearer"].snapshot()
        sync()
        snaps.append(time.perf_counter() - start)
    out["snapshot_ms"] = round(statistics.median(snaps) * 1e3, 3)
    return out


def main() -> None:
    args = parse()
    rank, world = setup(args)
    checks(args, rank, world)
    figures = timing(args, rank, world)
    import megatron.core

    if rank == 0:
        device = "cpu (compat layer)" if args.cpu_compat else torch.cuda.get_device_name()
        report = {
            "checks": {n: ok for n, ok, _ in RESULTS},
            "timing": figures,
            "config": {k: v for k, v in vars(args).items()},
            "world_size": world,
            "device": device,
            "torch": torch.__version__,
            "megatron_core": megatron.core.__version__,
            "python": platform.python_version(),
        }
        print(json.dumps(report), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2))
    failed = any(not ok for _, ok, _ in RESULTS)
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
