"""Small real models for the torch tests: attention + MLP blocks in a ModuleList."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ftaudit.trainer_hooks.torch import TrainerHooks, sample_token_ids

HIDDEN, VOCAB, HEADS = 16, 50, 2


class Block(nn.Module):
    """A pre-norm transformer block; returns a tuple like many library layers do."""

    def __init__(self, hidden: int = HIDDEN, batch_first: bool = True) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, HEADS, batch_first=batch_first, dropout=0.0)
        self.norm2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(
            nn.Linear(hidden, 2 * hidden), nn.GELU(), nn.Linear(2 * hidden, hidden)
        )

    def forward(self, hidden: torch.Tensor) -> tuple[torch.Tensor, None]:
        x = self.norm1(hidden)
        hidden = hidden + self.attn(x, x, x, need_weights=False)[0]
        return hidden + self.mlp(self.norm2(hidden)), None


class TinyTransformer(nn.Module):
    """Tokens [batch, seq] (or [seq, batch] with ``batch_first=False``) -> logits."""

    def __init__(self, layers: int = 2, batch_first: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.layers = nn.ModuleList(Block(batch_first=batch_first) for _ in range(layers))
        self.head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(tokens)
        for layer in self.layers:
            hidden, _ = layer(hidden)
        return self.head(hidden)


def make_model(seed: int = 0, **kwargs: object) -> TinyTransformer:
    torch.manual_seed(seed)
    return TinyTransformer(**kwargs)  # type: ignore[arg-type]


def tokens(batch: int, seq: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def lm_loss(
    logits: torch.Tensor, toks: torch.Tensor, weights: torch.Tensor | None = None
) -> torch.Tensor:
    """Next-token loss per sample, optionally weighted per sample (0 drops a sample)."""
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), toks[:, 1:], reduction="none"
    )
    per_sample = per_token.mean(dim=1)
    if weights is not None:
        per_sample = per_sample * weights
    return per_sample.sum()


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a tensor, for bitwise comparisons (sign of zero included)."""
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().contiguous().view(view)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def lm_backward(
    hooks: TrainerHooks, witness_ids: Sequence[int] | torch.Tensor, toks: torch.Tensor
) -> None:
    """One batch's forward and backward inside the hooks' batch scope (its witness rows)."""
    with hooks.batch(sample_token_ids(witness_ids, toks.shape[1])):
        hooks.optimizer.zero_grad()
        lm_loss(hooks.model(toks), toks).backward()
