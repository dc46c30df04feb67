"""SGLang and vLLM adapters against servers that hash real tensors and answer like the engines."""

from __future__ import annotations

import socket

import pytest
import torch
from torch import nn

from ftaudit.trainer_hooks.engines import EngineChecksumError, SGLangEngine, VLLMEngine
from tests.trainer_hooks.engines.fake_engines import FakeEngine, serve, sha256_hex, short_hex

pytestmark = pytest.mark.torch


def _state(seed: int = 0) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 6), nn.LayerNorm(6), nn.Linear(6, 4, bias=False))
    return {k: v.detach() for k, v in model.state_dict().items()}


def test_sglang_tensor_parallel_ranks_are_prefixed() -> None:
    engine = FakeEngine("sglang", tp=2)
    engine.load(_state())
    with serve(engine) as url:
        got = SGLangEngine(url).checksums()
    names = set(_state())
    assert set(got) == {f"tp{r}/{n}" for r in (0, 1) for n in names}
    for r in (0, 1):
        for n in names:
            assert got[f"tp{r}/{n}"] == short_hex(engine.tensor(n, tp_rank=r))
    # a column-parallel matrix differs between the ranks, a replicated norm does not
    assert got["tp0/0.weight"] != got["tp1/0.weight"]
    assert got["tp0/1.weight"] == got["tp1/1.weight"]
    assert engine.requests == [{"path": "/weights_checker", "body": {"action": "checksum"}}]


def test_sglang_pipeline_ranks_and_skip_list() -> None:
    engine = FakeEngine("sglang", tp=2, pp=2)
    engine.load(_state())
    with serve(engine) as url:
        got = SGLangEngine(url, skip_tensors=["bias"]).checksums()
    assert {k.split("/")[0] for k in got} == {"pp0.tp0", "pp0.tp1", "pp1.tp0", "pp1.tp1"}
    assert not any("bias" in k for k in got)
    assert engine.requests[0]["body"] == {"action": "checksum", "skip_tensor_list": ["bias"]}


def test_sglang_sees_a_changed_shard() -> None:
    engine = FakeEngine("sglang", tp=2)
    engine.load(_state())
    with serve(engine) as url:
        adapter = SGLangEngine(url)
        before = adapter.checksums()
        with torch.no_grad():
            engine.tensor("2.weight", tp_rank=1)[0, 0] += 1.0
        after = adapter.checksums()
    assert {k for k in before if before[k] != after[k]} == {"tp1/2.weight"}


def test_vllm_rank_keys_become_prefixes() -> None:
    engine = FakeEngine("vllm", tp=2)
    engine.load(_state())
    with serve(engine) as url:
        got = VLLMEngine(url).checksums()
    assert set(got) == {f"tp{r}/{n}" for r in (0, 1) for n in _state()}
    assert got["tp1/0.bias"] == sha256_hex(engine.tensor("0.bias", tp_rank=1))
    assert engine.requests == [{"path": "/weight_checker", "body": {"action": "checksum"}}]


def test_api_key_is_sent_as_bearer_token() -> None:
    engine = FakeEngine("sglang", api_key="s3cret")
    engine.load(_state())
    with serve(engine) as url:
        with pytest.raises(EngineChecksumError, match=r"401.*Unauthorized"):
            SGLangEngine(url).checksums()
        assert len(SGLangEngine(url, api_key="s3cret").checksums()) == len(_state())


def test_sglang_without_checksum_action_is_refused() -> None:
    engine = FakeEngine("sglang", legacy=True)
    engine.load(_state())
    with serve(engine) as url, pytest.raises(EngineChecksumError, match="does not support"):
        SGLangEngine(url).checksums()


def test_failed_check_and_wrong_endpoint_name_the_engine() -> None:
    engine = FakeEngine("sglang", failure="CUDA error: device-side assert triggered")
    engine.load(_state())
    with serve(engine) as url:
        with pytest.raises(EngineChecksumError, match=r"failed \(400\): CUDA error") as err:
            SGLangEngine(url).checksums()
    assert err.value.engine == f"sglang {url}"
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


def test_conflicting_ranks_and_empty_answers_are_refused() -> None:
    # vLLM names without a rank are rank 0's: the same tensor twice with two hashes
    with serve(FakeEngine("vllm"), raw_reply=b'{"checksums": {"w": "aa", "0:w": "bb"}}') as url:
        with pytest.raises(EngineChecksumError, match="tp0/w with different hashes"):
            VLLMEngine(url).checksums()
    with serve(FakeEngine("vllm"), raw_reply=b'{"checksums": {}}') as url:
        with pytest.raises(EngineChecksumError, match="no tensors"):
            VLLMEngine(url).checksums()
