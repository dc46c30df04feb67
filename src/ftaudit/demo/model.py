"""A tiny causal transformer language model, small enough to train in milliseconds on a CPU.

The layer stack is a ``ModuleList`` named ``layers`` so the trainer hooks can put their
head witness at its input and tail witness at its output without touching this code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ftaudit.demo.config import ModelConfig


class Block(nn.Module):
    """Pre-norm attention and MLP with residuals; takes and returns [batch, seq, hidden]."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.norm1 = nn.LayerNorm(cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.norm2 = nn.LayerNorm(cfg.hidden)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden),
            nn.GELU(),
            nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        att = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, h))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Token and position embeddings, ``layers``, a final norm and an untied LM head."""

    def __init__(self, cfg: ModelConfig, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.pos = nn.Embedding(max_len, cfg.hidden)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits [batch, seq, vocab] for input tokens [batch, seq]."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """log p(target) per position, [batch, seq]."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def policy_loss(
    logprobs: torch.Tensor, mask: torch.Tensor, advantages: torch.Tensor, global_samples: int
) -> torch.Tensor:
    """GRPO-style policy gradient (LM: advantages of one make it next-token NLL).

    Each sample's masked mean log-probability is weighted by its advantage; dividing by the
    GLOBAL sample count makes the cross-cell SUM of gradients the global batch mean. A
    sample with zero advantage contributes an exact zero gradient.
    """
    per_sample = (logprobs * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1.0)
    return -(advantages * per_sample).sum() / global_samples
