"""SGLang and vLLM adapters against servers that hash real tensors and answer like the engines.

The servers (``fake_engines.py``) follow the upstream answers field by field; the sources
and commits are named there.
"""

from __future__ import annotations

import json
import socket

import pytest
import torch
from torch import nn

from ftaudit.trainer_hooks.engines import (
    ChecksumUnsupportedError,
    EngineChecksumError,
    SGLangEngine,
    VLLMEngine,
)
from tests.trainer_hooks.engines.fake_engines import FakeEngine, serve, sha256_hex, short_hex

pytestmark = pytest.mark.torch


def _state(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 6), nn.LayerNorm(6), nn.Linear(6, 4, bias=False))
    return {k: v.detach() for k, v in model.state_dict().items()}


def _draft() -> dict[str, torch.Tensor]:
    """A speculative draft model (EAGLE-like): a layer of its own and an lm head."""
    torch.manual_seed(5)
    return {"layers.0.weight": torch.randn(6, 6), "lm_head.weight": torch.randn(4, 6)}


def _raw(answer: object) -> bytes:
    return json.dumps(answer).encode()


@pytest.mark.parametrize("shape", ["roles", "object"])
def test_sglang_tensor_parallel_ranks_are_labelled(shape: str) -> None:
    engine = FakeEngine("sglang", tp=2, sglang_shape=shape)  # type: ignore[arg-type]
    engine.load(_state())
    with serve(engine) as url:
        got = SGLangEngine(url).checksums()
    names = set(_state())
    assert set(got) == {f"dp0.pp0.tp{r}/{n}" for r in (0, 1) for n in names}
    for r in (0, 1):
        for n in names:
            assert got[f"dp0.pp0.tp{r}/{n}"] == short_hex(engine.tensor(n, tp_rank=r))
    # a column-parallel matrix differs between the ranks, a replicated norm does not
    assert got["dp0.pp0.tp0/0.weight"] != got["dp0.pp0.tp1/0.weight"]
    assert got["dp0.pp0.tp0/1.weight"] == got["dp0.pp0.tp1/1.weight"]
    assert engine.requests == [{"path": "/weights_checker", "body": {"action": "checksum"}}]


def test_sglang_full_coordinates_with_data_and_pipeline_ranks() -> None:
    engine = FakeEngine("sglang", tp=2, pp=2, dp=2)
    engine.load(_state())
    with serve(engine) as url:
        got = SGLangEngine(url, skip_tensors=["bias"]).checksums()
    labels = {k.split("/")[0] for k in got}
    assert labels == {f"dp{d}.pp{p}.tp{t}" for d in (0, 1) for p in (0, 1) for t in (0, 1)}
    assert not any("bias" in k for k in got)
    assert engine.requests[0]["body"] == {"action": "checksum", "skip_tensor_list": ["bias"]}
    # both data-parallel replicas hold the same weights: the same hashes, GPU for GPU
    for key, value in got.items():
        if key.startswith("dp0."):
            assert got["dp1." + key[len("dp0.") :]] == value


@pytest.mark.parametrize("shape", ["roles", "object"])
def test_sglang_draft_tensors_stay_apart(shape: str) -> None:
    engine = FakeEngine("sglang", tp=2, sglang_shape=shape)  # type: ignore[arg-type]
    # the draft has a tensor named like a target tensor, with other values
    draft = {**_draft(), "0.weight": torch.zeros(6, 8)}
    engine.load(_state(), draft)
    with serve(engine) as url:
        adapter = SGLangEngine(url)
        got = adapter.checksums()
        drafts = {k for k in got if k.split("/", 1)[1].startswith("draft.")}
        assert drafts == {f"dp0.pp0.tp{r}/draft.{n}" for r in (0, 1) for n in draft}
        assert got["dp0.pp0.tp0/draft.0.weight"] != got["dp0.pp0.tp0/0.weight"]
        # a draft that missed a sync is seen in the draft's tensors only
        with torch.no_grad():
            engine.draft[(0, 0, 1)]["layers.0.weight"][0, 0] += 1.0
        after = adapter.checksums()
    assert {k for k in got if got[k] != after[k]} == {"dp0.pp0.tp1/draft.layers.0.weight"}


def test_sglang_draft_role_takes_its_own_coordinates() -> None:
    # pull request #27750's shape with a draft role on other coordinates than the target's
    info = {"tp_size": 2, "dp_rank": 0, "dp_size": 1, "pp_rank": 0, "pp_size": 1}
    answer = {
        "success": True,
        "message": "Success.",
        "ranks": [
            {
                "checksums": {"w": "aa", "draft.w": "bb", "draft_step_1.w": "cc"},
                "per_gpu_checksum": "x",
                "parallelism_info": [
                    {"role": "target", "tp_rank": 1, **info, "rank": 1, "size": 2},
                    {"role": "draft", "tp_rank": 0, **info, "rank": 1, "size": 2},
                    {"role": "draft_step_1", "tp_rank": 1, **info, "rank": 1, "size": 2},
                ],
            }
        ],
        "per_engine_checksum": "y",
    }
    with serve(FakeEngine("sglang"), raw_reply=_raw(answer)) as url:
        got = SGLangEngine(url).checksums()
    assert got == {
        "dp0.pp0.tp1/w": "aa",
        "dp0.pp0.tp0/draft.w": "bb",
        "dp0.pp0.tp1/draft_step_1.w": "cc",
    }


def test_sglang_replicated_draft_is_one_copy_per_coordinates() -> None:
    # a draft with a tensor-parallel group of one on each of two GPUs: both report tp0
    info = {"dp_rank": 0, "dp_size": 1, "pp_rank": 0, "pp_size": 1, "rank": 0, "size": 2}

    def entry(tp: int, draft_hash: str) -> dict[str, object]:
        return {
            "checksums": {"w": f"t{tp}", "draft.w": draft_hash},
            "per_gpu_checksum": "x",
            "parallelism_info": [
                {"role": "target", "tp_rank": tp, "tp_size": 2, **info},
                {"role": "draft", "tp_rank": 0, "tp_size": 1, **info},
            ],
        }

    answer = {"success": True, "message": "", "ranks": [entry(0, "dd"), entry(1, "dd")]}
    with serve(FakeEngine("sglang"), raw_reply=_raw(answer)) as url:
        got = SGLangEngine(url).checksums()
    assert got == {"dp0.pp0.tp0/w": "t0", "dp0.pp0.tp1/w": "t1", "dp0.pp0.tp0/draft.w": "dd"}
    # one GPU's copy of the replicated draft differs: the engine is refused, not averaged
    answer["ranks"] = [entry(0, "dd"), entry(1, "ee")]
    with serve(FakeEngine("sglang"), raw_reply=_raw(answer)) as url:
        with pytest.raises(EngineChecksumError, match=r"draft\.w with different hashes"):
            SGLangEngine(url).checksums()


def test_sglang_hashes_are_opaque_strings() -> None:
    # the real hash is a 64-bit value computed on the GPU; nothing is assumed of its form
    answer = {
        "success": True,
        "message": "Success.",
        "ranks": [
            {
                "checksums": {"w": "0000000000000000", "v": "not-hex at all"},
                "per_gpu_checksum": "?",
                "parallelism_info": {
                    "tp_rank": 0, "tp_size": 1, "dp_rank": 0, "dp_size": 1,
                    "pp_rank": 0, "pp_size": 1, "rank": 0, "size": 1,
                },
            }
        ],
    }  # fmt: skip
    with serve(FakeEngine("sglang"), raw_reply=_raw(answer)) as url:
        got = SGLangEngine(url).checksums()
    assert got == {"dp0.pp0.tp0/w": "0000000000000000", "dp0.pp0.tp0/v": "not-hex at all"}


def test_sglang_malformed_answers_are_refused() -> None:
    info = {"tp_rank": 0, "tp_size": 1, "dp_rank": 0, "dp_size": 1, "pp_rank": 0, "pp_size": 1}
    entry = {"checksums": {"w": "aa"}, "per_gpu_checksum": "x", "parallelism_info": info}
    cases = {
        "no role": [{**entry, "parallelism_info": [info]}],
        "rank 2 outside a group of 1": [{**entry, "parallelism_info": {**info, "tp_rank": 2}}],
        "neither an object nor a list": [{**entry, "parallelism_info": "tp0"}],
        "belongs to none of the roles": [
            {**entry, "parallelism_info": [{"role": "draft", **info}]}
        ],
        "dp0.pp0.tp0/w with different hashes": [
            entry,
            {**entry, "checksums": {"w": "bb"}},
        ],
        "not a non-empty list": [],
    }
    for reason, ranks in cases.items():
        answer = {"success": True, "message": "", "ranks": ranks}
        with serve(FakeEngine("sglang"), raw_reply=_raw(answer)) as url:
            with pytest.raises(EngineChecksumError, match=reason):
                SGLangEngine(url).checksums()


def test_sglang_changed_shard_is_seen_on_its_gpu_only() -> None:
    engine = FakeEngine("sglang", tp=2)
    engine.load(_state())
    with serve(engine) as url:
        adapter = SGLangEngine(url)
        before = adapter.checksums()
        with torch.no_grad():
            engine.tensor("2.weight", tp_rank=1)[0, 0] += 1.0
        after = adapter.checksums()
    assert {k for k in before if before[k] != after[k]} == {"dp0.pp0.tp1/2.weight"}


def test_sglang_without_checksum_action_is_reported_as_such() -> None:
    engine = FakeEngine("sglang", checksum_action=False)
    engine.load(_state())
    with serve(engine) as url, pytest.raises(ChecksumUnsupportedError) as err:
        SGLangEngine(url).checksums()
    assert "engine has no checksum action" in str(err.value)
    assert "Unsupported action='checksum'" in str(err.value)
    # an answer that succeeds without per-rank checksums is no checksum either
    with serve(FakeEngine("sglang"), raw_reply=b'{"success": true, "message": ""}') as url:
        with pytest.raises(ChecksumUnsupportedError, match="engine has no checksum action"):
            SGLangEngine(url).checksums()


@pytest.mark.parametrize("keys", ["full", "tp"])
def test_vllm_key_forms_become_labels(keys: str) -> None:
    engine = FakeEngine("vllm", tp=2, vllm_keys=keys)  # type: ignore[arg-type]
    engine.load(_state())
    with serve(engine) as url:
        got = VLLMEngine(url).checksums()
    label = {"full": "dp0.pp0.pcp0.tp{r}.ep0", "tp": "tp{r}"}[keys]
    assert set(got) == {f"{label.format(r=r)}/{n}" for r in (0, 1) for n in _state()}
    assert got[f"{label.format(r=1)}/0.bias"] == sha256_hex(engine.tensor("0.bias", tp_rank=1))
    assert engine.requests == [{"path": "/weight_checker", "body": {"action": "checksum"}}]


def test_vllm_data_parallel_ranks_stay_apart() -> None:
    engine = FakeEngine("vllm", tp=2, dp=2)
    engine.load(_state())
    with serve(engine) as url:
        adapter = VLLMEngine(url)
        before = adapter.checksums()
        with torch.no_grad():
            engine.tensor("0.weight", tp_rank=0, dp_rank=1)[0, 0] += 1.0
        after = adapter.checksums()
    assert {k.split("/")[0] for k in before} == {
        f"dp{d}.pp0.pcp0.tp{t}.ep0" for d in (0, 1) for t in (0, 1)
    }
    assert {k for k in before if before[k] != after[k]} == {"dp1.pp0.pcp0.tp0.ep0/0.weight"}


def test_vllm_unknown_and_mixed_key_forms_are_refused() -> None:
    refused = {
        # a name without a rank, the reviewer's proposed form, a reordered form
        '{"checksums": {"w": "aa"}}': "unknown checksum key form 'w'",
        '{"checksums": {"dp=0/pp=0/tp=0/ep=0:w": "aa"}}': "unknown checksum key form",
        '{"checksums": {"tp0:dp0:pp0:pcp0:ep0:w": "aa"}}': "unknown checksum key form",
        '{"checksums": {"0:w": "aa", "dp0:pp0:pcp0:tp1:ep0:w": "bb"}}': "mixes checksum key",
        '{"checksums": {}}': "no tensors",
    }
    for raw, reason in refused.items():
        with serve(FakeEngine("vllm"), raw_reply=raw.encode()) as url:
            with pytest.raises(EngineChecksumError, match=reason):
                VLLMEngine(url).checksums()


def test_api_key_is_sent_as_bearer_token() -> None:
    engine = FakeEngine("sglang", api_key="s3cret")
    engine.load(_state())
    with serve(engine) as url:
        with pytest.raises(EngineChecksumError, match=r"401.*Unauthorized"):
            SGLangEngine(url).checksums()
        assert len(SGLangEngine(url, api_key="s3cret").checksums()) == len(_state())


def test_failed_check_and_wrong_endpoint_name_the_engine() -> None:
    engine = FakeEngine("sglang", failure="CUDA error: device-side assert triggered")
    engine.load(_state())
    with serve(engine) as url:
        with pytest.raises(EngineChecksumError, match=r"failed \(400\): CUDA error") as err:
            SGLangEngine(url).checksums()
    assert err.value.engine == f"sglang {url}"
    assert not isinstance(err.value, ChecksumUnsupportedError)
    engine = FakeEngine("vllm")  # an SGLang adapter pointed at a vLLM server
    engine.load(_state())
    with serve(engine) as url:
        with pytest.raises(EngineChecksumError, match=r"sglang http://.*failed \(404\): Not Found"):
            SGLangEngine(url).checksums()


def test_unreachable_and_non_json_answers() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(EngineChecksumError, match="cannot reach"):
        VLLMEngine(f"http://127.0.0.1:{port}", timeout_s=5).checksums()
    with serve(FakeEngine("vllm"), raw_reply=b"<html>proxy error</html>") as url:
        with pytest.raises(EngineChecksumError, match=r"not JSON.*proxy error"):
            VLLMEngine(url).checksums()


def test_conflicting_hashes_under_one_name_are_refused() -> None:
    raw = b'{"checksums": {"0:w": "aa", "00:w": "bb"}}'  # rank 0 twice, two hashes
    with serve(FakeEngine("vllm"), raw_reply=raw) as url:
        with pytest.raises(EngineChecksumError, match="tp0/w with different hashes"):
            VLLMEngine(url).checksums()
