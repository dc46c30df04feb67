"""The demo's data: a generated corpus, GRPO-like rollouts with hashed rewards, and batches.

Everything is a pure function of (seed, sample index), so a step replayed after a restart
trains exactly the samples the abandoned one did, and the run can declare a
deterministic data order. No torch here: batches are numpy arrays.

Sample index ``i`` is position ``i`` of the run's stream: epoch ``i // N``, read from the
item that the loader's shuffled order (:mod:`ftaudit.demo.loader`) puts there (item
``i mod N`` when no order is given). For the RL objective item ``j`` is completion
``j mod K`` of prompt ``j // K`` (K samples per prompt, one GRPO group per prompt); for
the LM objective it is a corpus window. The dataset is map-style (``len``, ``ds[j]`` is
the token row the model receives), so ``ftaudit.dataset.build_manifest`` takes it as is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ftaudit.demo.config import DataConfig, Objective

_SUCCESSORS = 3
"""Each token has this many likely successors: a language a tiny model can learn."""


@lru_cache(maxsize=8)
def corpus(seed: int, vocab_size: int, num_tokens: int) -> np.ndarray:
    """A Markov-chain corpus: sparse random transitions, so next-token loss can fall."""
    rng = np.random.default_rng(seed)
    successors = rng.integers(0, vocab_size, size=(vocab_size, _SUCCESSORS))
    choices = rng.integers(0, _SUCCESSORS, size=num_tokens)
    tokens = np.empty(num_tokens, dtype=np.int64)
    tokens[0] = 0
    for i in range(1, num_tokens):
        tokens[i] = successors[tokens[i - 1], choices[i]]
    tokens.setflags(write=False)
    return tokens


def _digest(*parts: int) -> int:
    data = b"".join(int(p).to_bytes(8, "little", signed=True) for p in parts)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def reward(tokens: np.ndarray) -> float:
    """A deterministic pseudo-random 0/1 reward: one bit of a hash of the sample's tokens."""
    digest = hashlib.blake2b(np.ascontiguousarray(tokens, dtype=np.int64).tobytes(), digest_size=8)
    return float(digest.digest()[0] & 1)


def group_advantages(rewards: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """GRPO: rewards normalised within one group; a group of equal rewards gets exact zeros."""
    rewards = np.asarray(rewards, dtype=np.float64)
    std = rewards.std()
    if std == 0.0:
        return np.zeros_like(rewards)
    return (rewards - rewards.mean()) / (std + eps)


@dataclass(frozen=True)
class Batch:
    """The samples one cell trains in one attempt, and per sample its loss weights.

    ``advantages`` is per sample (RL) and all ones for LM; ``loss_mask`` marks the tokens
    whose log-probability enters the loss (completions for RL, every target for LM).
    """

    sample_indices: np.ndarray
    witness_ids: np.ndarray
    tokens: np.ndarray
    loss_mask: np.ndarray
    advantages: np.ndarray
    rewards: np.ndarray
    all_zero: np.ndarray
    """Per sample: every advantage of the sample is zero (its gradient is exactly zero)."""

    @property
    def token_counts(self) -> np.ndarray:
        return self.loss_mask.sum(axis=1).astype(np.int64)


class Dataset:
    """The run's sample stream for one seed and objective."""

    def __init__(self, data: DataConfig, vocab_size: int, seed: int, objective: Objective) -> None:
        self.config = data
        self.seed = seed
        self.objective = objective
        self.vocab_size = vocab_size
        self.corpus = corpus(seed, vocab_size, data.corpus_tokens)
        self.num_slices = (len(self.corpus) - 1) // (data.seq_len + 1)
        order = np.argsort(self.corpus[:-1], kind="stable")
        bounds = np.searchsorted(self.corpus[:-1][order], np.arange(vocab_size + 1))
        self._followers = [order[bounds[t] : bounds[t + 1]] + 1 for t in range(vocab_size)]

    @property
    def size(self) -> int:
        """N, the number of distinct items: windows (LM) or prompts times completions (RL)."""
        if self.objective == "lm":
            return self.num_slices
        return self.num_slices * self.config.samples_per_prompt

    def step_samples(self, step: int, offset: int = 0) -> np.ndarray:
        """The sample indices of a step's global batch: a contiguous block of the stream."""
        n = self.config.samples_per_step
        return np.arange(step * n + offset, (step + 1) * n + offset, dtype=np.int64)

    def text_slice(self, item: int) -> np.ndarray:
        start = (item % self.num_slices) * (self.config.seq_len + 1)
        return self.corpus[start : start + self.config.seq_len + 1]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, item: int) -> np.ndarray:
        """The token row the model receives for ``item`` (inputs and shifted targets)."""
        if not 0 <= item < self.size:
            raise IndexError(f"item {item} is outside the dataset of {self.size}")
        if self.objective == "lm":
            return self.text_slice(item)
        tokens = self.rollout(item)
        return np.concatenate([tokens, tokens[-1:]])  # same shape as LM: targets shifted

    def rollout(self, item: int) -> np.ndarray:
        """Prompt of the item's group, then a completion sampled from the corpus' chain.

        The completion walks the corpus from a hashed position after the prompt's last
        token, so it is plausible text and reproducible from the item alone.
        """
        cfg = self.config
        item = item % self.size
        prompt = self.text_slice(item // cfg.samples_per_prompt)[: cfg.prompt_len]
        rng = np.random.default_rng(_digest(self.seed, item))
        completion = np.empty(cfg.completion_len, dtype=np.int64)
        previous = int(prompt[-1])
        for k in range(cfg.completion_len):
            followers = self._followers[previous]
            nxt = (
                self.corpus[rng.choice(followers)]
                if followers.size
                else rng.integers(0, self.vocab_size)
            )
            completion[k] = nxt
            previous = int(nxt)
        return np.concatenate([prompt, completion])

    def batch(
        self,
        sample_indices: np.ndarray,
        witness_ids: np.ndarray,
        items: np.ndarray | None = None,
    ) -> Batch:
        """The tokens and loss weights of whole GRPO groups (RL) or windows (LM).

        ``items`` are the dataset items the loader read for the samples (by default
        item ``i mod N`` of each sample index ``i``).
        """
        cfg = self.config
        samples = np.asarray(sample_indices, dtype=np.int64)
        read = samples % self.size if items is None else np.asarray(items, dtype=np.int64)
        seqs = np.stack([self[int(j)] for j in read])
        if self.objective == "lm":
            mask = np.ones((len(samples), cfg.seq_len), dtype=np.float32)
            adv = np.ones(len(samples))
            return Batch(samples, np.asarray(witness_ids), seqs, mask, adv, adv, adv == 0.0)
        rewards = np.array([reward(seq[:-1]) for seq in seqs])
        groups = read // cfg.samples_per_prompt
        adv = np.zeros(len(samples))
        for g in np.unique(groups):
            members = groups == g
            if members.sum() != cfg.samples_per_prompt:
                raise ValueError(f"a shard must hold whole GRPO groups; group {g} is split")
            adv[members] = group_advantages(rewards[members])
        mask = np.zeros((len(samples), cfg.seq_len), dtype=np.float32)
        mask[:, cfg.prompt_len - 1 : cfg.seq_len - 1] = 1.0  # positions predicting completions
        return Batch(samples, np.asarray(witness_ids), seqs, mask, adv, rewards, adv == 0.0)
