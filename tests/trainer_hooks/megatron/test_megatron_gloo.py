"""megatron-core 0.16.1 with witnesses in 2 (or 4) real gloo processes (``mcore_child.py``).

Each scenario is one spawned 2-process run (megatron's import alone takes ~20 s), shared
by the tests of this module through a module-scoped fixture; the tests assert on what
the ranks measured on their real tensors. This module itself never imports megatron.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ftaudit.verifier import verify

pytestmark = [pytest.mark.torch, pytest.mark.slow]
CHILD = Path(__file__).with_name("mcore_child.py")
ROOT = Path(__file__).parents[3]
Facts = list[dict[str, Any]]


def _spawn(scenario: str, out_dir: Path, world: int = 2) -> Facts:
    """Run ``scenario`` on ``world`` gloo ranks; their facts, rank by rank.

    Generous waits: 4 processes importing megatron on 2 loaded cores take minutes.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    # a file rendezvous: a port found free and let go can be taken before rank 0 binds it
    store = out_dir / f"{scenario}.store"
    # this checkout's src first: the editable install may point at another checkout
    pythonpath = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    env = {**os.environ, "PYTHONPATH": pythonpath, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), scenario, str(rank), str(store), str(out_dir), str(world)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=900)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out[-6000:]
    return [json.loads((out_dir / f"{scenario}_rank{r}.json").read_text()) for r in range(world)]


@pytest.fixture(scope="module")
def dp(tmp_path_factory: pytest.TempPathFactory) -> tuple[Facts, Path]:
    out_dir = tmp_path_factory.mktemp("megatron_dp")
    return _spawn("dp", out_dir), out_dir


@pytest.fixture(scope="module")
def tp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Facts, Path]:
    """TP=2 with SP, then PP=2 with virtual chunks, then PP=2 through the schedule."""
    out_dir = tmp_path_factory.mktemp("megatron_tp")
    return _spawn("tp", out_dir), out_dir


@pytest.fixture(scope="module")
def tp(tp_run: tuple[Facts, Path]) -> Facts:
    return tp_run[0]


@pytest.fixture(scope="module")
def pp(tp_run: tuple[Facts, Path]) -> tuple[Facts, Path]:
    return tp_run


@pytest.fixture(scope="module")
def tpdp(tmp_path_factory: pytest.TempPathFactory) -> Facts:
    return _spawn("tpdp", tmp_path_factory.mktemp("megatron_tpdp"), world=4)


HEAD, TAIL = "pp0_chunk0.head", "pp0_chunk0.tail"


# -- DP=2, DistributedOptimizer --------------------------------------------------------------


def test_distributed_optimizer_through_chained_optimizer(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    for rank in facts:
        assert rank["optimizer"] == "ChainedOptimizer"
        assert rank["members"] == ["DistributedOptimizer"]


def test_a_witness_straddles_the_shard_boundary(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    instance, boundary = facts[0]["boundary"]
    # rank 0 steps rows 0 .. boundary-1 of that witness, rank 1 the rest
    assert [instance, 0, boundary] in facts[0]["shards"]
    assert [instance, boundary, 6000 - boundary] in facts[1]["shards"]
    assert 0 < boundary < 6000


def test_exactly_the_trained_rows_are_nonzero_on_every_rank(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    trained = facts[0]["trained"]
    _, boundary = facts[0]["boundary"]
    assert {boundary - 1, boundary} <= set(trained)  # rows on both sides of the boundary
    for rank in facts:
        # each rank trained 2 of the 4 samples; both report all 4 (DP reduce + exchange)
        assert rank["step1"] == {HEAD: trained, TAIL: trained}
        assert rank["step1_places"][f"param/{HEAD}"] == trained
        assert rank["step1_places"][f"param/{TAIL}"] == trained


def test_each_rank_holds_only_its_shard_of_the_straddling_witness(
    dp: tuple[Facts, Path],
) -> None:
    facts, _ = dp
    _, boundary = facts[0]["boundary"]
    trained = facts[0]["trained"]
    for key in ("main", "exp_avg", "exp_avg_sq"):
        assert facts[0]["step1_places"][f"{key}/{HEAD}"] == [i for i in trained if i < boundary]
        assert facts[1]["step1_places"][f"{key}/{HEAD}"] == [i for i in trained if i >= boundary]


def test_stale_rows_are_cleared_in_every_place(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    stale = set(facts[0]["stale"])
    kept = sorted(set(facts[0]["trained"]) - stale)
    for rank in facts:
        places = rank["cleared_places"]
        assert {k.split("/")[0] for k in places} == {"param", "main", "exp_avg", "exp_avg_sq"}
        for place, nonzero in places.items():
            assert not stale & set(nonzero), place
            # what is left is exactly the kept rows of this place's shard
            assert set(nonzero) == set(kept) & set(rank["step1_places"][place]), place


def test_cleared_rows_stay_zero_after_the_next_step(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    for rank in facts:
        # rows 0 and both sides of the boundary were cleared with their Adam moments and
        # got no gradient in step 2: still zero. 5999 (zeroed in the param and the main
        # shard only, moments kept: the bug of clearing too little) is nonzero again.
        assert rank["control_zeroed"] == {HEAD: [], TAIL: []}
        assert rank["step2"] == {HEAD: [100, 200, 5999], TAIL: [100, 200, 5999]}


def test_unclearable_layouts_are_refused(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    for rank in facts:
        assert "Adam is not supported" in rank["refused_torch_adam"]
        assert "build the optimizer after installing them" in rank["refused_late_install"]


def test_cuda_graphs_and_megatron_fsdp_are_refused_up_front(dp: tuple[Facts, Path]) -> None:
    facts, _ = dp
    for rank in facts:
        # at install: a graphed layer skips nn.Module.__call__, the hooks would never run
        graphs = rank["refused_cuda_graphs"]
        assert graphs.startswith(
            "model chunk 0: CUDA graphs (cuda_graph_impl='transformer_engine')"
        )
        assert "hooks never run" in graphs
        # at the clearer: megatron's DistributedOptimizer for Megatron-FSDP has no groups
        assert rank["fsdp_optimizer_has_groups"] is False
        fsdp = rank["refused_megatron_fsdp"]
        assert "Megatron-FSDP (use_megatron_fsdp=True) is not supported" in fsdp


# -- checkpointing -------------------------------------------------------------------------------


def test_witnesses_are_in_the_sharded_checkpoint_but_not_in_exports(
    dp: tuple[Facts, Path],
) -> None:
    facts, _ = dp
    for rank in facts:
        ckpt = rank["checkpoint"]
        assert ckpt["witness_keys"] == [
            "ftaudit_witness.pp0_chunk0.head.weight",
            "ftaudit_witness.pp0_chunk0.tail.weight",
        ]
        assert ckpt["export_witness_keys"] == []  # without_witnesses(state_dict)
        hashed = set(ckpt["hashed_witnesses"])
        for instance in (HEAD, TAIL):
            assert f"param/chunk0.ftaudit_witness.{instance}.weight" in hashed
    # every rank hashes its shards of the main params and moments
    for instance in (HEAD, TAIL):
        name = f"chunk0.ftaudit_witness.{instance}.weight"
        for key in (f"master/{name}", f"optim/{name}/exp_avg", f"optim/{name}/exp_avg_sq"):
            assert any(key in r["checkpoint"]["hashed_witnesses"] for r in facts), key


def test_dist_checkpointing_round_trip(dp: tuple[Facts, Path]) -> None:
    facts, out_dir = dp
    assert (out_dir / "ckpt" / "metadata.json").is_file()
    for rank in facts:
        ckpt = rank["checkpoint"]
        assert ckpt["fresh_before_load"] == {HEAD: [], TAIL: []}
        assert ckpt["missing_hashes"] == []
        # every param (witness rows included), main-param shard and Adam moment comes back
        # bitwise. Adam's per-param "step" does not: without Apex/Transformer Engine
        # megatron-core 0.16.1 restores it as the value of the dummy step it needs to
        # initialise a never-stepped optimizer before loading (1.0, saved 2.0)
        assert all(k.endswith("/step") for k in ckpt["differing_hashes"])
        assert ckpt["loaded_snapshot"] == ckpt["saved_snapshot"] == rank["step2"]
        # the restored optimizer clears too: 100 was zeroed, 300 trained, 200 kept
        assert ckpt["after_load_step"] == {HEAD: [200, 300, 5999], TAIL: [200, 300, 5999]}


# -- through the hooks, to the verifier ---------------------------------------------------------


def _ft004(run_dir: Path) -> list[Any]:
    report = verify(run_dir)
    return [v for r in report.results for v in r.violations if v.code == "FT004"]


def test_hooked_run_with_a_discarded_attempt_verifies(dp: tuple[Facts, Path]) -> None:
    facts, out_dir = dp
    report = verify(out_dir / "run_clean")
    assert report.passed(), json.dumps(report.to_dict(), indent=1)
    discarded = facts[0]["clean_run"]["allocated"][1]
    assert discarded[:2] == [1, 0]
    for rank in facts:
        step1 = rank["clean_run"]["snapshots"][1]
        assert step1[:2] == [1, 1]
        assert not set(discarded[2]) & set(step1[2][HEAD])


def test_applied_discarded_attempt_is_reported_as_extra_ids(dp: tuple[Facts, Path]) -> None:
    facts, out_dir = dp
    leaked = set(facts[0]["leaked_run"]["allocated"][1][2])  # step 1, attempt 0
    for rank in facts:
        step1 = rank["leaked_run"]["snapshots"][1]
        assert leaked <= set(step1[2][HEAD]) and leaked <= set(step1[2][TAIL])
    violations = _ft004(out_dir / "run_leak")
    assert violations, "the leaked attempt was not reported"
    for v in violations:
        assert set(v.ids) == leaked, v
        assert set(v.sample_indices) == {4, 5, 6, 7}, v  # step 1's samples
        assert "leaked into the weights" in v.message, v.message
        assert "ranks 0, 1" in v.message, v.message  # seen by both DP ranks
    # both witnesses, steps 1 and 2 (the leaked rows are still in the active window)
    where = {(v.location.step, v.location.instance) for v in violations}
    assert where == {(1, HEAD), (1, TAIL), (2, HEAD), (2, TAIL)}


# -- TP=2 with sequence parallelism; PP=2 with virtual chunks -----------------------------------


def test_sequence_parallel_ranks_see_the_whole_sequence(tp: Facts) -> None:
    for rank in tp:
        assert rank["members"] == ["Float16OptimizerWithFloat16Params"]
        # under SP rank 0 holds tokens 0-3 (samples 1 and 3), rank 1 tokens 4-7 (2 and 4);
        # the witness's gathered backward gives both ranks all four rows
        assert rank["step1"] == {HEAD: [1, 2, 3, 4], TAIL: [1, 2, 3, 4]}
        assert rank["main_equal_across_tp"]  # the same fp32 rows, bitwise, on both ranks
        assert rank["norm_equal_across_tp"]  # the test's SP norm is reduced as megatron's


def test_tensor_parallel_clearing(tp: Facts) -> None:
    for rank in tp:
        for place, nonzero in rank["cleared_places"].items():
            assert nonzero == [1, 4], place
        assert rank["step2"] == {HEAD: [1, 4, 5, 6], TAIL: [1, 4, 5, 6]}


def test_checkpoint_keys_are_unique_per_stage_and_chunk(tp: Facts) -> None:
    keys = [rank["pp_witness_keys"] for rank in tp]
    assert keys == [
        [
            ["ftaudit_witness.pp0_chunk0.head.weight", "ftaudit_witness.pp0_chunk0.tail.weight"],
            ["ftaudit_witness.pp0_chunk1.head.weight", "ftaudit_witness.pp0_chunk1.tail.weight"],
        ],
        [
            ["ftaudit_witness.pp1_chunk0.head.weight", "ftaudit_witness.pp1_chunk0.tail.weight"],
            ["ftaudit_witness.pp1_chunk1.head.weight", "ftaudit_witness.pp1_chunk1.tail.weight"],
        ],
    ]
    flat = [k for rank in keys for chunk in rank for k in chunk]
    assert len(set(flat)) == 8
    # and no key of megatron's own collides with them
    others = [k for rank in tp for k in rank["pp_all_keys"] if "ftaudit_witness" not in k]
    assert not set(flat) & set(others)


# -- PP=2 through the pipeline schedule, micro-batches --------------------------------------


def test_pipeline_schedule_witnesses_every_micro_batch_on_every_stage(
    pp: tuple[Facts, Path],
) -> None:
    facts, _ = pp
    for stage, rank in enumerate(facts):
        head, tail = f"pp{stage}_chunk0.head", f"pp{stage}_chunk0.tail"
        assert rank["stage"] == stage and rank["clean_run"]["instances"] == [head, tail]
        # step 0: two micro-batches of two samples, each forward with its own ids
        assert rank["clean_run"]["forward_ids"][0] == [0, 0, [[0, 1], [2, 3]]]
        # after the pipelined backward and the step, both micro-batches' rows are set on
        # both stages (a witness that saw one micro-batch only would miss two ids)
        assert rank["clean_run"]["snapshots"][0] == [0, 0, {head: [0, 1, 2, 3], tail: [0, 1, 2, 3]}]


def test_pipelined_run_with_a_discarded_attempt_verifies(pp: tuple[Facts, Path]) -> None:
    facts, out_dir = pp
    report = verify(out_dir / "run_clean")
    assert report.passed(), json.dumps(report.to_dict(), indent=1)
    discarded = set(facts[0]["clean_run"]["allocated"][1][2])  # step 1, attempt 0
    for rank in facts:
        step, attempt, rows = rank["clean_run"]["snapshots"][1]
        assert (step, attempt) == (1, 1)
        assert all(not discarded & set(r) for r in rows.values())


def test_pipelined_leak_is_reported_on_both_stages(pp: tuple[Facts, Path]) -> None:
    facts, out_dir = pp
    leaked = set(facts[0]["leaked_run"]["allocated"][1][2])
    violations = _ft004(out_dir / "run_leak")
    assert violations, "the leaked attempt was not reported"
    for v in violations:
        assert set(v.ids) == leaked, v
        assert "leaked into the weights" in v.message, v.message
    where = {(v.location.step, v.location.instance) for v in violations}
    instances = {f"pp{s}_chunk0.{end}" for s in (0, 1) for end in ("head", "tail")}
    assert where == {(step, i) for step in (1, 2) for i in instances}


# -- TP=2 x DP=2 with the DistributedOptimizer (4 processes) --------------------------------


def test_tensor_and_data_parallel_ranks_report_every_row(tpdp: Facts) -> None:
    assert sorted((r["tp_rank"], r["dp_rank"]) for r in tpdp) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    instance, boundary = tpdp[0]["boundary"]
    for rank in tpdp:
        assert rank["members"] == ["DistributedOptimizer"] and rank["dp_size"] == 2
        # the DP ranks step either side of the boundary; both TP ranks of a DP rank alike
        expected = [instance, 0, boundary] if rank["dp_rank"] == 0 else [instance, boundary]
        assert any(s[: len(expected)] == expected for s in rank["shards"]), rank["shards"]
        trained = rank["trained"]
        assert {boundary - 1, boundary} <= set(trained)
        assert rank["step1"] == {HEAD: trained, TAIL: trained}


def test_tensor_and_data_parallel_clearing(tpdp: Facts) -> None:
    for rank in tpdp:
        stale = set(rank["stale"])
        for place, nonzero in rank["cleared_places"].items():
            assert not stale & set(nonzero), place
        # cleared rows stay zero after the next step; the kept row and the new ones are set
        assert rank["step2"] == {HEAD: [100, 101, 5999], TAIL: [100, 101, 5999]}
