"""Per-tensor hashes: bitwise, layout-independent, bf16, and the names of a trainer's state."""

from __future__ import annotations

import pytest
import torch

from ftaudit.eventlog.events import WHOLE_TAG
from ftaudit.trainer_hooks.torch import install_witnesses, state_hashes, tensor_hash
from ftaudit.trainer_hooks.torch.checksums import object_hash, whole_digest
from ftaudit.trainer_hooks.torch.dtensor import lane_sums
from ftaudit.trainer_hooks.torch.state_scalars import group_hashes
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


def test_save_load_and_heal_points_add_a_whole_tensor_digest_of_every_tensor() -> None:
    """At a save, a load and a heal every tensor of a replica also gets ``@whole``: the
    digest an FSDP2 shard group sums over its rows, so a restore compares across DDP and
    FSDP; the bitwise hashes under the plain names stay what an after-step checksum logs."""
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    toks = tokens(2, 4)
    lm_loss(model(toks), toks).backward()
    optimizer.step()
    plain = state_hashes(model, optimizer)
    whole = state_hashes(model, optimizer, whole=True)
    digests = {k.removesuffix(WHOLE_TAG): v for k, v in whole.items() if k.endswith(WHOLE_TAG)}
    assert {k: v for k, v in whole.items() if not k.endswith(WHOLE_TAG)} == plain
    assert digests.keys() == plain.keys()  # every value of this state is a tensor
    weight = model.head.weight.detach()
    rows = weight.shape[0] // 2  # two ranks' rows, summed as their all-reduce would
    sums = (lane_sums(weight[:rows], 0) + lane_sums(weight[rows:], rows * weight.shape[1])).tolist()
    assert digests["param/head.weight"] == whole_digest(weight, sums)
    assert digests["param/head.weight"] != digests["optim/head.weight/exp_avg"]


def test_param_group_hashes_survive_a_betas_tuple_becoming_a_list() -> None:
    # torch's set_state_dict hands Adam's betas back as a list: the value is unchanged
    model = make_model()
    adam = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.99))
    before = group_hashes(adam)
    adam.param_groups[0]["betas"] = [0.9, 0.99]
    assert group_hashes(adam) == before
    adam.param_groups[0]["lr"] = 2e-3
    assert group_hashes(adam)["group/0/lr"] != before["group/0/lr"]
    assert object_hash(torch.zeros(2)) != object_hash(torch.zeros(3))
