"""The recorder logs one EngineWeightChecksum per sync; in-process engines; no torch on import."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from ftaudit.eventlog import (
    EngineWeightChecksum,
    RolloutManager,
    RunLog,
    read_records,
    step_context,
)
from ftaudit.trainer_hooks.engines import (
    ERROR_TENSOR,
    EngineChecksumError,
    EngineChecksumRecorder,
    SGLangEngine,
    TorchModuleEngine,
    VLLMEngine,
)
from ftaudit.trainer_hooks.torch import install_witnesses, tensor_hash
from tests.support.torch_models import make_model
from tests.trainer_hooks.engines.fake_engines import FakeEngine, serve

pytestmark = pytest.mark.torch


def _events(run_dir: Path) -> list[tuple[int | None, int | None, EngineWeightChecksum]]:
    return [
        (r.envelope.step, r.envelope.attempt, r.event)
        for r in read_records(run_dir)
        if isinstance(r.event, EngineWeightChecksum)
    ]


def _unused_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_engine_package_imports_no_torch() -> None:
    code = (
        "import sys, ftaudit.trainer_hooks.engines as e\n"
        "assert e.SGLangEngine and e.EngineChecksumRecorder\n"
        "bad = [m for m in ('torch', 'megatron') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_torch_engine_hashes_state_without_witnesses() -> None:
    model = make_model(seed=3)
    install_witnesses(model, 16, layers="layers")
    got = TorchModuleEngine(model).checksums()
    state = model.state_dict()
    expected = {f"tp0/{k}": tensor_hash(v) for k, v in state.items() if "ftaudit_witness" not in k}
    assert got == expected
    assert any("ftaudit_witness" in k for k in state)  # the witnesses were there, and left out


def test_torch_engine_tensor_parallel_modules() -> None:
    torch.manual_seed(0)
    shards = [nn.Linear(4, 2), nn.Linear(4, 2)]
    got = TorchModuleEngine(shards).checksums()
    assert set(got) == {"tp0/weight", "tp0/bias", "tp1/weight", "tp1/bias"}
    assert got["tp1/weight"] == tensor_hash(shards[1].weight)
    with pytest.raises(ValueError, match="at least one module"):
        TorchModuleEngine([])


def test_record_initial_sync_and_step_syncs(tmp_path: Path) -> None:
    run = RunLog.start(tmp_path, buffer_size=8)
    fakes = [FakeEngine("sglang", tp=2) for _ in range(2)]
    state = make_model(seed=1).state_dict()
    for fake in fakes:
        fake.load(state)
    with serve(fakes[0]) as url0, serve(fakes[1]) as url1:
        recorder = EngineChecksumRecorder(run, [SGLangEngine(url0), SGLangEngine(url1)])
        initial = recorder.record()
        with step_context(4, 1):
            at_step = recorder.record()
        explicit = recorder.record(step=5, attempt=0)
    run.close()
    assert initial[0] == initial[1] == at_step[0] == explicit[1]
    assert all(k.startswith(("dp0.pp0.tp0/", "dp0.pp0.tp1/")) for k in initial[0])
    logged = _events(tmp_path)
    assert [(s, a) for s, a, _ in logged] == [(None, None), (4, 1), (5, 0)]
    assert logged[0][2].engines == initial
    kinds = {
        r.envelope.source_kind
        for r in read_records(tmp_path)
        if isinstance(r.event, EngineWeightChecksum)
    }
    assert kinds == {RolloutManager().kind}


def test_unreadable_engine_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = RunLog.start(tmp_path, buffer_size=8)
    fake = FakeEngine("vllm")
    fake.load(make_model().state_dict())
    with serve(fake) as url, caplog.at_level(logging.WARNING):
        recorder = EngineChecksumRecorder(
            run, {0: VLLMEngine(url), 3: VLLMEngine(_unused_url(), timeout_s=5)}
        )
        got = recorder.record()
    run.close()
    assert set(got) == {0, 3}
    assert ERROR_TENSOR not in got[0] and len(got[0]) == len(fake.ranks[(0, 0, 0)])
    assert list(got[3]) == [ERROR_TENSOR]
    assert got[3][ERROR_TENSOR].startswith("engine 3 unreadable: vllm http://127.0.0.1:")
    assert recorder.failures == 1
    assert "cannot read the weight checksums of engine 3" in caplog.text
    assert _events(tmp_path)[0][2].engines == got


def test_errors_raise_and_configuration_checks(tmp_path: Path) -> None:
    run = RunLog.start(tmp_path, buffer_size=8)
    recorder = EngineChecksumRecorder(run, [VLLMEngine(_unused_url(), timeout_s=5)], errors="raise")
    with pytest.raises(EngineChecksumError, match="cannot reach"):
        recorder.record()
    assert _events(tmp_path) == []  # nothing half-logged
    with pytest.raises(ValueError, match="different kinds"):
        EngineChecksumRecorder(run, [VLLMEngine("http://a"), SGLangEngine("http://b")])
    with pytest.raises(ValueError, match="no engines"):
        EngineChecksumRecorder(run, [])
    with pytest.raises(ValueError, match="errors must be"):
        EngineChecksumRecorder(run, [VLLMEngine("http://a")], errors="ignore")  # type: ignore[arg-type]
    run.close()
