"""The tiny LM and its GRPO loss with the hooks' witnesses: zero advantage leaves no trace."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ftaudit.demo.config import DataConfig, ModelConfig  # noqa: E402
from ftaudit.demo.data import Dataset  # noqa: E402
from ftaudit.demo.model import TinyLM, policy_loss, token_logprobs  # noqa: E402
from ftaudit.trainer_hooks.torch import install_witnesses, sample_token_ids  # noqa: E402

pytestmark = pytest.mark.torch


def _grad_rows(advantages: list[float]) -> tuple[np.ndarray, np.ndarray]:
    torch.manual_seed(0)
    data = DataConfig(corpus_tokens=2000, prompts_per_step=1)
    model = TinyLM(ModelConfig(), data.seq_len)
    witnesses = install_witnesses(model, 8, layers="layers")
    ds = Dataset(data, ModelConfig().vocab_size, seed=0, objective="rl")
    batch = ds.batch(ds.step_samples(0), np.array([1, 3, 5, 7]))
    tokens = torch.from_numpy(batch.tokens)
    with witnesses.tokens(sample_token_ids(batch.witness_ids, data.seq_len)):
        logits = model(tokens[:, :-1])
        loss = policy_loss(
            token_logprobs(logits, tokens[:, 1:]),
            torch.from_numpy(batch.loss_mask),
            torch.tensor(advantages),
            4,
        )
        loss.backward()
    inst = witnesses.instances()
    return (
        inst["chunk0.head"].weight.grad.reshape(-1).numpy(),
        inst["chunk0.tail"].weight.grad.reshape(-1).numpy(),
    )


def test_logits_have_the_vocabulary_shape() -> None:
    model = TinyLM(ModelConfig(), 16)
    assert model(torch.zeros(3, 16, dtype=torch.long)).shape == (3, 16, ModelConfig().vocab_size)


def test_zero_advantage_samples_leave_exactly_zero_witness_rows() -> None:
    for rows in _grad_rows([1.0, 0.0, -1.0, 0.0]):
        assert rows[1] > 0 and rows[5] > 0  # samples with an advantage reach head and tail
        assert rows[3] == 0.0 and rows[7] == 0.0  # zero advantage: exactly nothing
        assert not rows[[0, 2, 4, 6]].any()  # unallocated slots untouched


def test_the_loss_is_normalised_by_the_global_sample_count() -> None:
    lp = torch.zeros(2, 4) - 1.0
    mask = torch.ones(2, 4)
    assert float(policy_loss(lp, mask, torch.ones(2), 2)) == pytest.approx(1.0)
    assert float(policy_loss(lp, mask, torch.ones(2), 4)) == pytest.approx(0.5)
