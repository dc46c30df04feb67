"""The witness in the model: exact zero forward, |grad| backward, hooks, ids context."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from ftaudit.trainer_hooks.torch import (
    WitnessEmbedding,
    WitnessSet,
    find_witnesses,
    install_witnesses,
    is_witness_name,
    nonzero_rows,
    packed_token_ids,
    sample_token_ids,
    without_witnesses,
)
from tests.support.torch_models import (
    HIDDEN,
    bitwise_equal,
    lm_loss,
    make_model,
    tokens,
)

pytestmark = pytest.mark.torch
B = 32


def _pair(dtype: torch.dtype) -> tuple[nn.Module, nn.Module, WitnessSet]:
    plain = make_model().to(dtype)
    witnessed = copy.deepcopy(plain)
    return plain, witnessed, install_witnesses(witnessed, B, layers="layers", dtype=dtype)


# -- forward: exact zero ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows_nonzero", [False, True])
def test_forward_is_bitwise_unchanged(dtype: torch.dtype, rows_nonzero: bool) -> None:
    plain, witnessed, witnesses = _pair(dtype)
    if rows_nonzero:
        with torch.no_grad():
            for w in witnesses.instances().values():
                w.weight.copy_(torch.randn(B, 1))
    toks = tokens(4, 8)
    with witnesses.tokens(sample_token_ids([1, 2, 3, 4], 8)):
        got = witnessed(toks)
    assert bitwise_equal(got, plain(toks))


def test_forward_keeps_negative_zero() -> None:
    witness = WitnessEmbedding(4)
    hidden = torch.tensor([[[-0.0, 0.0, 1.0]]], requires_grad=True)
    out = witness(hidden, torch.tensor([[2]]))
    assert bitwise_equal(out, hidden.detach())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_other_gradients_are_bitwise_unchanged(dtype: torch.dtype, deterministic: None) -> None:
    plain, witnessed, witnesses = _pair(dtype)
    toks = tokens(4, 8)
    lm_loss(plain(toks), toks).backward()
    with witnesses.tokens(sample_token_ids([5, 6, 7, 8], 8)):
        lm_loss(witnessed(toks), toks).backward()
    grads = dict(plain.named_parameters())
    checked = 0
    for name, param in witnessed.named_parameters():
        if is_witness_name(name):
            assert param.grad is not None and param.grad.abs().sum() > 0
            continue
        assert bitwise_equal(param.grad, grads[name].grad), name
        checked += 1
    assert checked == len(grads)


# -- backward: sum over hidden of |grad| ----------------------------------------------------


def test_row_gradient_is_sum_of_absolute_upstream_grads() -> None:
    witness = WitnessEmbedding(6)
    hidden = torch.zeros(2, 3, HIDDEN, requires_grad=True)
    upstream = torch.randn(2, 3, HIDDEN)
    witness(hidden, torch.tensor([[1, 1, 1], [4, 4, 2]])).backward(upstream)
    per_token = upstream.abs().sum(-1)
    expected = torch.zeros(6)
    expected[1] = per_token[0].sum()
    expected[4] = per_token[1, :2].sum()
    expected[2] = per_token[1, 2]
    torch.testing.assert_close(witness.weight.grad.reshape(-1), expected)
    assert torch.equal(hidden.grad, upstream)  # the hidden gradient passes through


def test_cancelling_gradient_still_marks_the_row() -> None:
    upstream = torch.tensor([[[1.0, -1.0], [2.0, -2.0]]])  # sums to zero over hidden
    ids = torch.tensor([[3, 3]])
    plain = nn.Embedding(5, 1)
    nn.init.zeros_(plain.weight)
    hidden = torch.zeros(1, 2, 2, requires_grad=True)
    (hidden + plain(ids)).backward(upstream)  # a plain broadcast add
    assert plain.weight.grad[3].item() == 0.0  # cancelled: the sample would look untrained
    witness = WitnessEmbedding(5)
    witness(torch.zeros(1, 2, 2, requires_grad=True), ids).backward(upstream)
    assert witness.weight.grad[3].item() == 6.0


def test_seq_batch_hidden_layout() -> None:
    witness = WitnessEmbedding(8)
    hidden = torch.zeros(3, 2, HIDDEN, requires_grad=True)  # [seq, batch, hidden]
    upstream = torch.zeros(3, 2, HIDDEN)
    upstream[:, 1] = 1.0  # only the second sample gets gradient
    witness(hidden, torch.tensor([[5, 5, 5], [6, 6, 6]]), layout="sbh").backward(upstream)
    assert nonzero_rows(witness.weight.grad).to_list() == [6]
    assert witness.weight.grad[6].item() == 3 * HIDDEN


def test_packed_sequences_and_untracked_tokens() -> None:
    witness = WitnessEmbedding(8)
    ids = packed_token_ids([2, 7], [3, 2])
    assert ids.tolist() == [2, 2, 2, 7, 7]
    ids = torch.cat([ids, torch.tensor([-1])])  # a padding token: no witness
    hidden = torch.zeros(6, HIDDEN, requires_grad=True)
    witness(hidden, ids).backward(torch.ones(6, HIDDEN))
    grad = witness.weight.grad.reshape(-1)
    assert grad.tolist() == [0, 0, 3 * HIDDEN, 0, 0, 0, 0, 2 * HIDDEN]


def test_ids_must_match_the_hidden_shape() -> None:
    with pytest.raises(ValueError, match="do not match hidden states"):
        WitnessEmbedding(4)(torch.zeros(2, 3, 4), torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="integers"):
        with WitnessSet(4).tokens(torch.zeros(2, 3)):
            pass


# -- after an optimizer step ----------------------------------------------------------------


def _train_once(model: nn.Module, ids: list[int], weights: torch.Tensor | None = None) -> None:
    witnesses = find_witnesses(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    toks = tokens(len(ids), 8)
    with witnesses.tokens(sample_token_ids(ids, 8)):
        lm_loss(model(toks), toks, weights).backward()
    optimizer.step()


def test_after_adam_exactly_the_trained_rows_are_nonzero() -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    _train_once(model, [3, 7, 11, 30])
    for name, witness in witnesses.instances().items():
        assert nonzero_rows(witness.weight).to_list() == [3, 7, 11, 30], name


def test_sample_with_exactly_zero_gradient_stays_zero() -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    _train_once(model, [3, 7, 11, 30], weights=torch.tensor([1.0, 0.0, 1.0, 1.0]))
    for name, witness in witnesses.instances().items():
        assert nonzero_rows(witness.weight).to_list() == [3, 11, 30], name


def test_no_ids_context_or_no_grad_passes_through() -> None:
    model = make_model()
    witnesses = install_witnesses(model, B, layers="layers")
    toks = tokens(2, 8)
    lm_loss(model(toks), toks).backward()  # no ids context: nothing witnessed
    for witness in witnesses.instances().values():
        assert witness.weight.grad is None
    with torch.no_grad(), witnesses.tokens(sample_token_ids([1, 2], 8)):
        model(toks)


# -- installation ---------------------------------------------------------------------------


def test_install_names_instances_and_registers_parameters() -> None:
    model = make_model(layers=3)
    witnesses = install_witnesses(model, B, layers="layers")
    assert list(witnesses.instances()) == ["chunk0.head", "chunk0.tail"]
    names = [n for n in model.state_dict() if is_witness_name(n)]
    assert names == ["ftaudit_witness.chunk0.head.weight", "ftaudit_witness.chunk0.tail.weight"]
    assert all(not is_witness_name(n) for n in without_witnesses(model.state_dict()))
    assert all(w.weight.shape == (B, 1) for w in witnesses.instances().values())
    assert all(not w.weight.any() for w in witnesses.instances().values())


def test_several_chunks_and_errors() -> None:
    class TwoStacks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Sequential(nn.Linear(4, 4))
            self.b = nn.Sequential(nn.Linear(4, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    model = TwoStacks()
    witnesses = install_witnesses(model, 8, layers=["a", "b"])
    assert list(witnesses.instances()) == [
        "chunk0.head",
        "chunk0.tail",
        "chunk1.head",
        "chunk1.tail",
    ]
    with witnesses.tokens(torch.tensor([[1, 2]])):
        model(torch.randn(1, 2, 4)).sum().backward()
    for witness in witnesses.instances().values():
        assert nonzero_rows(witness.weight.grad).to_list() == [1, 2]
    with pytest.raises(ValueError, match="already"):
        install_witnesses(model, 8, layers="a")
    with pytest.raises(ValueError, match="no submodule"):
        install_witnesses(TwoStacks(), 8, layers="nope")
    with pytest.raises(ValueError, match=r"chunk0\.head"):
        WitnessSet(8).add("flat")


def test_hidden_passed_by_keyword_is_witnessed() -> None:
    class KwLayer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, *, hidden_states: torch.Tensor) -> torch.Tensor:
            return self.lin(hidden_states)

    layer = KwLayer()
    witnesses = WitnessSet(8)
    witness = witnesses.attach(layer, "chunk0.head", at="input")
    with witnesses.tokens(torch.tensor([[5]])):
        layer(hidden_states=torch.randn(1, 1, 4)).sum().backward()
    assert nonzero_rows(witness.weight.grad).to_list() == [5]
    witnesses.detach_hooks()
    layer(hidden_states=torch.randn(1, 1, 4))
