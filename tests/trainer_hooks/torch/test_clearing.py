"""Snapshot then clear: parameters, master copies and optimizer moments; unknown optimizers."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from ftaudit.eventlog import IntRuns
from ftaudit.trainer_hooks.torch import (
    UnsupportedOptimizerError,
    WitnessClearer,
    install_witnesses,
    nonzero_rows,
    sample_token_ids,
)
from tests.support.torch_models import lm_loss, make_model, tokens

pytestmark = pytest.mark.torch
B = 32

OPTIMIZERS = {
    "adam": lambda p: torch.optim.Adam(p, lr=1e-2),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1),
    "adam_amsgrad": lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=1e-2, momentum=0.9),
    "sgd": lambda p: torch.optim.SGD(p, lr=1e-2),
}


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, ids: list[int] | None) -> None:
    optimizer.zero_grad(set_to_none=False)  # witness grads stay as zeros, not None
    toks = tokens(4, 8, seed=len(ids or []))
    if ids is None:  # a step with zero witness gradient: only momentum can move a row
        lm_loss(model(toks), toks).backward()
    else:
        witnesses = model.ftaudit_witness
        with witnesses.tokens(sample_token_ids(ids, 8)):
            lm_loss(model(toks), toks).backward()
    optimizer.step()


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_clear_zeroes_parameter_and_moments_and_stays_zero(name: str) -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    optimizer = OPTIMIZERS[name](model.parameters())
    clearer = WitnessClearer(witnesses, optimizer)
    _step(model, optimizer, [1, 2, 3, 4])
    assert list(clearer.snapshot().values()) == [IntRuns(starts=[1], lengths=[4])] * 2

    clearer.zero([2, 3])
    for witness in witnesses.instances().values():
        assert nonzero_rows(witness.weight).to_list() == [1, 4]
        for key, value in optimizer.state[witness.weight].items():
            if isinstance(value, torch.Tensor) and value.shape == witness.weight.shape:
                assert not value[2:4].any(), key
                assert value[1].any(), key  # uncleared rows keep their state

    # a following step with zero witness gradient: the cleared rows stay zero, while
    # uncleared rows with momentum keep moving
    before = {n: w.weight.detach().clone() for n, w in witnesses.instances().items()}
    _step(model, optimizer, None)
    for instance, witness in witnesses.instances().items():
        assert not witness.weight[2:4].any()
        if name != "sgd":  # plain SGD has no momentum: nothing moves without gradient
            assert not torch.equal(witness.weight[1], before[instance][1])


def test_without_clearing_momentum_would_revive_a_zeroed_row() -> None:
    """Why the moments are cleared: zeroing only the parameter is not enough under Adam."""
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    _step(model, optimizer, [1, 2, 3, 4])
    with torch.no_grad():
        for witness in witnesses.instances().values():
            witness.weight[2:4] = 0  # parameter only
    _step(model, optimizer, None)
    assert all(w.weight[2:4].all() for w in witnesses.instances().values())


def test_snapshot_and_clear_read_the_master_copy() -> None:
    model = make_model().to(torch.bfloat16)
    witnesses = install_witnesses(model, B, layers="layers", dtype=torch.bfloat16)
    masters = {p: p.detach().float().clone().requires_grad_() for p in model.parameters()}
    optimizer = torch.optim.Adam(list(masters.values()), lr=1e-2)
    witness_masters = {w.weight: masters[w.weight] for w in witnesses.instances().values()}
    clearer = WitnessClearer(witnesses, optimizer, witness_masters)
    toks = tokens(2, 8)
    with witnesses.tokens(sample_token_ids([5, 9], 8)):
        lm_loss(model(toks), toks).backward()
    for param, master in masters.items():
        master.grad = param.grad.float()
    optimizer.step()  # the model's bf16 rows are still zero; the fp32 masters moved
    assert list(clearer.snapshot().values()) == [IntRuns.from_ids([5, 9])] * 2
    clearer.zero([9])
    for witness in witnesses.instances().values():
        master = witness_masters[witness.weight]
        assert nonzero_rows(master).to_list() == [5]
        assert not optimizer.state[master]["exp_avg"][9].any()
        assert not optimizer.state[master]["exp_avg_sq"][9].any()


@pytest.mark.parametrize("cls", [torch.optim.RMSprop, torch.optim.Adagrad, torch.optim.Adamax])
def test_unknown_optimizers_are_refused(cls: type[torch.optim.Optimizer]) -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    with pytest.raises(UnsupportedOptimizerError, match=f"{cls.__name__} is not supported"):
        WitnessClearer(witnesses, cls(model.parameters()))


def test_subclass_of_a_supported_optimizer_is_accepted() -> None:
    class MyAdamW(torch.optim.AdamW):
        pass

    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    assert WitnessClearer(witnesses, MyAdamW(model.parameters())).state_keys[0] == "exp_avg"


def test_witnesses_outside_the_optimizer_are_refused() -> None:
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters())  # built before installing
    witnesses = install_witnesses(model, B, layers="layers")
    with pytest.raises(ValueError, match="not in the optimizer"):
        WitnessClearer(witnesses, optimizer)


def test_clearing_a_wrapped_arc_and_out_of_range_ids() -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    clearer = WitnessClearer(witnesses, torch.optim.SGD(model.parameters(), lr=1.0))
    with torch.no_grad():
        for witness in witnesses.instances().values():
            witness.weight.fill_(1.0)
    clearer.zero(IntRuns.arc(30, 4, B))  # 30, 31, 0, 1
    for witness in witnesses.instances().values():
        assert nonzero_rows(witness.weight) == IntRuns(starts=[2], lengths=[28])
    with pytest.raises(ValueError, match="outside"):
        clearer.zero([B])
