"""End to end: a real training run syncs its weights to engines after every step; ft-verify.

The trainer's weights (witnesses excluded) are pushed to three engines after each
committed step and the recorder logs their checksums. A clean run passes every rule; an
engine that misses part of one sync fails FT007 at that step, naming the engine and the
tensors, and only FT007.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
import torch

from ftaudit.trainer_hooks import DriverSession, ranks
from ftaudit.trainer_hooks.engines import (
    EngineChecksumRecorder,
    SGLangEngine,
    TorchModuleEngine,
    VLLMEngine,
    WeightChecksumSource,
)
from ftaudit.trainer_hooks.torch import (
    TrainerHooks,
    install_witnesses,
    sample_token_ids,
    without_witnesses,
)
from ftaudit.verifier import Report, verify
from tests.support.torch_models import lm_loss, make_model, tokens
from tests.trainer_hooks.engines.fake_engines import FakeEngine, serve

pytestmark = pytest.mark.torch
B, BATCH, SEQ, STEPS, BROKEN_STEP = 32, 4, 6, 3, 1
LABELS = {"sglang": "dp0.pp0.tp{t}", "vllm": "dp0.pp0.pcp0.tp{t}.ep0", "torch": "tp{t}"}


@contextmanager
def _fleet(kind: str) -> Iterator[tuple[list, list]]:
    """Three engines of ``kind`` (two tensor-parallel ranks each) and their adapters."""
    if kind == "torch":
        modules = [[make_model(seed=9), make_model(seed=9)] for _ in range(3)]
        yield modules, [TorchModuleEngine(m, name=f"engine{i}") for i, m in enumerate(modules)]
        return
    fakes = [FakeEngine(kind, tp=2) for _ in range(3)]  # type: ignore[arg-type]
    adapter = SGLangEngine if kind == "sglang" else VLLMEngine
    with ExitStack() as stack:
        urls = [stack.enter_context(serve(f)) for f in fakes]
        yield fakes, [adapter(u) for u in urls]


def _push(
    engine: FakeEngine | list[torch.nn.Module], state: dict[str, torch.Tensor], skip: str | None
) -> None:
    """A weight sync; the update of tensor ``skip`` does not arrive (the old copy stays)."""
    if isinstance(engine, FakeEngine):
        old = {key: tensors[skip] for key, tensors in engine.ranks.items()} if skip else {}
        engine.load(state)
        for key, value in old.items():
            engine.ranks[key][skip] = value  # type: ignore[index]
        return
    with torch.no_grad():
        for module in engine:
            for name, value in module.state_dict().items():
                if name != skip:
                    value.copy_(state[name])


def _run(tmp_path: Path, kind: str, broken: bool) -> Report:
    run_dir = tmp_path / "run"
    driver = DriverSession.start(
        run_dir, buffer_size=B, dataset_size=1000, deterministic_order=True
    )
    model = make_model(seed=0)
    install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    hooks = TrainerHooks.attach(
        run_dir, driver.incarnation, cell=0, rank=0, model=model, optimizer=optimizer
    )
    with _fleet(kind) as (engines, adapters):
        fleet: list[WeightChecksumSource] = adapters
        recorder = EngineChecksumRecorder.attach(run_dir, driver.incarnation, fleet)
        for engine in engines:
            _push(engine, without_witnesses(model.state_dict()), None)
        recorder.record()  # the initial sync
        for step in range(STEPS):
            info = driver.allocate(step, 0, range(step * BATCH, (step + 1) * BATCH))
            toks = tokens(BATCH, SEQ, seed=step)
            with hooks.step(step, 0):
                with hooks.batch(sample_token_ids(info.witness_ids, SEQ)):
                    optimizer.zero_grad()
                    lm_loss(model(toks), toks).backward()
                optimizer.step()
                hooks.after_optimizer_step(info.stale_ids)
                state = without_witnesses(model.state_dict())
                for i, engine in enumerate(engines):
                    skip = "head.weight" if broken and i == 2 and step == BROKEN_STEP else None
                    _push(engine, state, skip)
                recorder.record()
            driver.end_attempt(step, 0, {0: ranks("normal")})
        recorder.close()
    hooks.close()
    driver.finish()
    return verify(run_dir)


@pytest.mark.parametrize("kind", ["sglang", "torch"])
def test_clean_run_verifies(tmp_path: Path, kind: str) -> None:
    report = _run(tmp_path, kind, broken=False)
    failed = {r.code: [v.message for v in r.violations] for r in report.results if r.violations}
    assert failed == {}
    ft007 = next(r for r in report.results if r.code == "FT007")
    assert ft007.checked == STEPS + 1  # the initial sync and one per step


@pytest.mark.parametrize("kind", ["sglang", "vllm", "torch"])
def test_divergent_engine_fails_ft007(tmp_path: Path, kind: str) -> None:
    report = _run(tmp_path, kind, broken=True)
    failed = {r.code: r.violations for r in report.results if r.violations}
    assert set(failed) == {"FT007"}, failed
    (violation,) = failed["FT007"]
    assert violation.location.step == BROKEN_STEP
    # both tensor-parallel ranks of engine 2, labelled with each engine kind's coordinates
    label = LABELS[kind]
    names = f"{label.format(t=0)}/head.weight, {label.format(t=1)}/head.weight"
    assert violation.message.startswith(
        f"engine 2 differs from engine 0 after the sync of step {BROKEN_STEP}: "
        f"2 tensor(s) hash differently [{names}]"
    ), violation.message
