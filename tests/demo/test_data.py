"""The demo's data: deterministic corpus and rollouts, hashed rewards, GRPO advantages."""

from __future__ import annotations

import numpy as np
import pytest

from ftaudit.demo.config import DataConfig
from ftaudit.demo.data import Dataset, corpus, group_advantages, reward


def test_corpus_is_a_pure_function_of_the_seed() -> None:
    a, b = corpus(1, 16, 500), corpus(1, 16, 500)
    assert a is b or np.array_equal(a, b)
    assert not np.array_equal(corpus(1, 16, 500), corpus(2, 16, 500))
    assert a.min() >= 0 and a.max() < 16


def test_reward_is_a_deterministic_bit_of_the_tokens() -> None:
    tokens = np.arange(10)
    assert reward(tokens) == reward(tokens.copy())
    rewards = {reward(np.array([i, i + 1, i + 2])) for i in range(200)}
    assert rewards == {0.0, 1.0}  # both values occur: groups are sometimes mixed


def test_advantages_are_normalised_within_a_group() -> None:
    adv = group_advantages(np.array([1.0, 0.0, 0.0, 1.0]))
    assert adv.mean() == pytest.approx(0.0)
    assert adv.std() == pytest.approx(1.0, abs=1e-5)
    assert (adv[[0, 3]] > 0).all() and (adv[[1, 2]] < 0).all()


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_an_equal_reward_group_has_exactly_zero_advantage(value: float) -> None:
    adv = group_advantages(np.full(4, value))
    assert np.array_equal(adv, np.zeros(4)) and not np.signbit(adv).any()


def test_rl_batches_are_reproducible_and_flag_zero_advantage_groups() -> None:
    ds = Dataset(DataConfig(corpus_tokens=4000), vocab_size=24, seed=3, objective="rl")
    samples = ds.step_samples(0)
    first = ds.batch(samples, np.arange(len(samples)))
    again = ds.batch(samples, np.arange(len(samples)))
    assert np.array_equal(first.tokens, again.tokens)
    assert np.array_equal(first.advantages, again.advantages)
    # all_zero marks exactly the groups whose rewards are equal
    groups = first.rewards.reshape(-1, ds.config.samples_per_prompt)
    equal = (groups == groups[:, :1]).all(axis=1)
    assert np.array_equal(first.all_zero.reshape(groups.shape).all(axis=1), equal)
    assert np.array_equal(first.all_zero.reshape(groups.shape).any(axis=1), equal)
    # the loss covers the completion only
    assert (first.token_counts == ds.config.completion_len).all()


def test_some_step_has_an_all_zero_group_so_the_excusal_path_runs() -> None:
    ds = Dataset(DataConfig(corpus_tokens=4000), vocab_size=24, seed=0, objective="rl")
    zero = [ds.batch(ds.step_samples(s), np.zeros(16, dtype=int)).all_zero.any() for s in range(8)]
    assert any(zero)


def test_a_shard_must_hold_whole_groups() -> None:
    ds = Dataset(DataConfig(corpus_tokens=4000), vocab_size=24, seed=0, objective="rl")
    with pytest.raises(ValueError, match="whole GRPO groups"):
        ds.batch(np.arange(1, 5), np.arange(4))


def test_lm_batches_are_corpus_windows_with_full_loss() -> None:
    ds = Dataset(DataConfig(corpus_tokens=4000), vocab_size=24, seed=0, objective="lm")
    batch = ds.batch(ds.step_samples(2), np.arange(16))
    assert batch.tokens.shape == (16, ds.config.seq_len + 1)
    assert not batch.all_zero.any()
    assert np.array_equal(batch.tokens[0], ds.text_slice(32))
    # index i is item i mod N: the stream wraps into the next epoch
    assert np.array_equal(ds.batch(np.array([ds.size]), np.array([0])).tokens[0], ds.text_slice(0))


def test_step_samples_are_contiguous_blocks() -> None:
    ds = Dataset(DataConfig(corpus_tokens=4000), vocab_size=24, seed=0, objective="rl")
    assert ds.step_samples(0).tolist() == list(range(16))
    assert ds.step_samples(3).tolist() == list(range(48, 64))
