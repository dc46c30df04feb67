"""Per-tensor hashes: bitwise, layout-independent, bf16, and the names of a trainer's state."""

from __future__ import annotations

import pytest
import torch

from ftaudit.trainer_hooks.torch import install_witnesses, state_hashes, tensor_hash
from tests.support.torch_models import lm_loss, make_model, tokens

pytestmark = pytest.mark.torch


def test_hash_ignores_layout_but_not_values_dtype_or_shape() -> None:
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    transposed = base.t().contiguous().t()  # same values, other strides
    assert not transposed.is_contiguous()
    assert tensor_hash(transposed) == tensor_hash(base)
    assert tensor_hash(base[:, 1:3]) == tensor_hash(base[:, 1:3].contiguous())
    assert tensor_hash(base) != tensor_hash(base.reshape(4, 3))
    assert tensor_hash(base) != tensor_hash(base.double())
    changed = base.clone()
    changed[2, 3] = torch.nextafter(changed[2, 3], torch.tensor(100.0))
    assert tensor_hash(changed) != tensor_hash(base)


def test_hash_is_bitwise_for_zero_signs_and_bf16() -> None:
    assert tensor_hash(torch.tensor([0.0])) != tensor_hash(torch.tensor([-0.0]))
    bf = torch.randn(5, 7).to(torch.bfloat16)
    assert tensor_hash(bf) == tensor_hash(bf.t().contiguous().t())
    assert tensor_hash(bf) != tensor_hash(bf.to(torch.float16))
    assert tensor_hash(torch.tensor(3.0)) == tensor_hash(torch.tensor(3.0))  # 0-dim
    assert tensor_hash(torch.empty(0)) != tensor_hash(torch.empty(0, 2))
    assert len(tensor_hash(bf)) == 32


def test_state_hashes_cover_params_buffers_witnesses_and_optimizer() -> None:
    model = make_model()
    model.register_buffer("seen", torch.zeros(3))
    install_witnesses(model, 16, layers="layers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    toks = tokens(2, 4)
    with model.ftaudit_witness.tokens(torch.tensor([[1] * 4, [2] * 4])):
        lm_loss(model(toks), toks).backward()
    optimizer.step()
    hashes = state_hashes(model, optimizer)
    assert "param/ftaudit_witness.chunk0.head.weight" in hashes
    assert "buffer/seen" in hashes
    assert "optim/ftaudit_witness.chunk0.tail.weight/exp_avg_sq" in hashes
    assert "optim/embed.weight/step" in hashes
    params = sum(1 for _ in model.parameters())
    assert sum(k.startswith("optim/") for k in hashes) == 3 * params

    twin = make_model()
    twin.register_buffer("seen", torch.zeros(3))
    install_witnesses(twin, 16, layers="layers")
    twin.load_state_dict(model.state_dict())
    twin_opt = torch.optim.AdamW(twin.parameters(), lr=1e-3)
    twin_opt.load_state_dict(optimizer.state_dict())
    assert state_hashes(twin, twin_opt) == hashes
    with torch.no_grad():
        twin.ftaudit_witness.chunk0.head.weight[3] = 1.0
    diff = {k for k, v in state_hashes(twin, twin_opt).items() if hashes[k] != v}
    assert diff == {"param/ftaudit_witness.chunk0.head.weight"}
