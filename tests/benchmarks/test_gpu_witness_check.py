"""The GPU witness check can fail: a witness that leaks into the forward is caught on the CPU.

``benchmarks/gpu_witness_check.py`` is meant to run unattended on a GPU; its forward
check once compared a model with itself (it entered another model's witness context), so
it passed whatever the witness did. Here the same checks run on a tiny CPU model, once
with the real witness (all pass) and once with a witness whose row value reaches the
forward (the forward check with nonzero rows must fail).
"""

from __future__ import annotations

from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from ftaudit.trainer_hooks.torch.witness import WitnessEmbedding
from tests.support.processes import load_benchmark

pytestmark = pytest.mark.torch
TINY = ["--device", "cpu", "--dtype", "fp32", "--layers", "2", "--hidden", "32", "--heads", "2"]
TINY += ["--vocab", "64", "--seq", "16", "--skip-timing"]


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return load_benchmark("gpu_witness_check.py")


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
