"""The GPU witness check can fail: a witness that leaks into the forward is caught on the CPU.

``benchmarks/gpu_witness_check.py`` is meant to run unattended on a GPU; its forward
check once compared a model with itself (it entered another model's witness context), so
it passed whatever the witness did. Here the same checks run on a tiny CPU model, once
with the real witness (all pass) and once with a witness whose row value reaches the
forward (the forward check with nonzero rows must fail).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from ftaudit.trainer_hooks.torch.witness import WitnessEmbedding

pytestmark = pytest.mark.torch
SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu_witness_check.py"
TINY = ["--device", "cpu", "--dtype", "fp32", "--layers", "2", "--hidden", "32", "--heads", "2"]
TINY += ["--vocab", "64", "--seq", "16", "--skip-timing"]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_witness_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look modules up by name
    spec.loader.exec_module(module)
    return module


def _results(script: ModuleType) -> dict[str, bool]:
    args = script.parse_args(TINY)
    return script.run_checks(args, torch.device("cpu"), torch.float32).results


def leaky_forward(self, hidden, ids, layout="bsh", region=None):  # type: ignore[no-untyped-def]
    """The defect: the witness adds its rows' values to the hidden states (a naive embedding)."""
    if layout == "sbh":
        ids = ids.transpose(0, 1)
    return hidden + F.embedding(ids.to(hidden.device), self.weight).to(hidden.dtype)


def test_every_check_passes_with_the_real_witness(script: ModuleType) -> None:
    results = _results(script)
    assert results and all(results.values()), results


def test_a_witness_leaking_into_the_forward_fails_the_forward_check(
    script: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(WitnessEmbedding, "forward", leaky_forward)
    results = _results(script)
    assert results["forward bitwise equal (nonzero rows)"] is False, results
    # the rows are trained and cleared as before: only the forward check sees the leak
    assert results["after Adam exactly the trained rows are nonzero (zero-grad sample stays zero)"]
