"""A real small fault-tolerant training in one process, for the false-alarm runs.

Each cell is a full replica (a tiny transformer with witnesses, Adam, its own
``TrainerHooks`` writing as ``Trainer(cell, 0)``); cells exchange gradients by a real SUM
of their gradients, so every cell's witness rows show the whole global batch. The driver
is the hooks' ``DriverSession``. Everything the verifier reads comes from the hooks'
public API; nothing is written by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from ftaudit.trainer_hooks import DriverSession, WitnessInfo, errored, ranks
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids
from ftaudit.verifier import Report, verify
from tests.support.torch_models import VOCAB, make_model

SEQ = 6

Loss = Callable[[torch.Tensor, torch.Tensor, "Batch"], torch.Tensor]
"""(logits [b, seq, vocab], tokens [b, seq], batch) -> this cell's loss."""


@dataclass(frozen=True)
class Batch:
    """One cell's shard of a global batch: tokens from the sample indices, per-sample RL data."""

    samples: np.ndarray
    ids: np.ndarray
    tokens: torch.Tensor
    advantages: torch.Tensor
    mask: torch.Tensor
    """[b, seq - 1]: which target tokens enter the loss."""
    global_size: int


def sample_tokens(samples: Sequence[int]) -> torch.Tensor:
    """Each sample's tokens are a pure function of its index (stream position)."""
    rows = [
        torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(int(s) + 7))
        for s in samples
    ]
    return torch.stack(rows)


def lm(logits: torch.Tensor, toks: torch.Tensor, batch: Batch) -> torch.Tensor:
    per_token = nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2), toks[:, 1:], reduction="none"
    )
    per_sample = (per_token * batch.mask).sum(1) / batch.mask.sum(1).clamp_min(1.0)
    return per_sample.sum() / batch.global_size


def logprobs(logits: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(logits[:, :-1], -1).gather(-1, toks[:, 1:, None])[..., 0]


def policy(kl: float = 0.0) -> Loss:
    """GRPO-style loss; ``kl > 0`` adds a penalty on the log-probabilities (as a KL to a
    reference does) that gives every sample with loss tokens gradient, whatever its
    advantage."""

    def loss(logits: torch.Tensor, toks: torch.Tensor, batch: Batch) -> torch.Tensor:
        lp = logprobs(logits, toks)
        tokens = batch.mask.sum(1).clamp_min(1.0)
        pg = -(batch.advantages * (lp * batch.mask).sum(1) / tokens)
        penalty = kl * ((lp**2) * batch.mask).sum(1) / tokens
        return (pg + penalty).sum() / batch.global_size

    return loss


@dataclass
class Replica:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    hooks: TrainerHooks


@dataclass
class Job:
    """One incarnation: the driver and ``cells`` replicas."""

    run_dir: Path
    driver: DriverSession
    replicas: list[Replica]
    loss: Loss = lm
    advantages: Callable[[np.ndarray], np.ndarray] = lambda s: np.ones(len(s))
    masked: Callable[[np.ndarray], np.ndarray] = lambda s: np.zeros(len(s), bool)
    """Per sample: fully masked (no loss tokens)."""
    pure_advantage_loss: bool = True
    log_advantages: bool = False
    items: Callable[[np.ndarray], np.ndarray] = lambda s: s
    """The dataset item each sample index (stream position) reads; tokens come from it."""
    model_factory: Callable[[], nn.Module] = field(default=lambda: make_model(seed=0))
    dead: set[int] = field(default_factory=set)

    @classmethod
    def start(
        cls,
        run_dir: Path,
        *,
        cells: int = 2,
        buffer_size: int = 64,
        resume_from: int | None = None,
        deterministic_order: bool = True,
        model_factory: Callable[[], nn.Module] | None = None,
        replica_local: Sequence[str] = (),
        **options: object,
    ) -> Job:
        driver = DriverSession.start(
            run_dir,
            buffer_size=buffer_size,
            resume_from=resume_from,
            deterministic_order=deterministic_order,
        )
        factory = model_factory or (lambda: make_model(seed=0))
        replicas = []
        for cell in range(cells):
            model = factory()
            install_witnesses(model, buffer_size, layers="layers")
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
            hooks = TrainerHooks.attach(
                run_dir,
                driver.incarnation,
                cell=cell,
                rank=0,
                model=model,
                optimizer=optimizer,
                **({"replica_local": list(replica_local)} if replica_local else {}),
            )
            replicas.append(Replica(model, optimizer, hooks))
        job = cls(run_dir, driver, replicas, model_factory=factory, **options)  # type: ignore[arg-type]
        if resume_from is not None:
            for replica in replicas:
                with replica.hooks.step(driver.first_step, 0):
                    replica.hooks.load_checkpoint(
                        run_dir / f"ckpt{resume_from}.c{replica.hooks.cell}.pt",
                        checkpoint=driver.resume_from,
                        resume_stale_ids=driver.resume_stale_ids,
                    )
        return job

    def _shards(self, samples: np.ndarray, ids: list[int]) -> list[Batch]:
        parts = np.array_split(np.arange(len(samples)), len(self.replicas))
        out = []
        for part in parts:
            s = samples[part]
            mask = torch.ones(len(s), SEQ - 1)
            mask[torch.from_numpy(self.masked(s))] = 0.0
            out.append(
                Batch(
                    s,
                    np.asarray(ids)[part],
                    sample_tokens(self.items(s)),
                    torch.from_numpy(self.advantages(s)).float(),
                    mask,
                    len(samples),
                )
            )
        return out

    def attempt(
        self,
        step: int,
        attempt: int,
        samples: Sequence[int],
        *,
        discard: bool = False,
        dies: int | None = None,
    ) -> tuple[bool, WitnessInfo]:
        """Train one attempt on every cell; cell 0 votes to discard when ``discard``; cell
        ``dies`` dies right after the gradient exchange (it logs nothing more, and what
        its writer had not flushed is lost with it)."""
        arr = np.asarray(samples, dtype=np.int64)
        info = self.driver.allocate(step, attempt, arr)  # logged even when empty (FT009)
        ids = info.witness_ids
        batches = self._shards(arr, ids) if len(arr) else [None] * len(self.replicas)
        for replica, batch in zip(self.replicas, batches, strict=True):
            replica.optimizer.zero_grad(set_to_none=False)
            if batch is None or not len(batch.samples):
                continue
            with replica.hooks.step(step, attempt):
                with replica.hooks.batch(sample_token_ids(batch.ids, SEQ)):
                    loss = self.loss(replica.model(batch.tokens), batch.tokens, batch)
                loss.backward()
                if self.log_advantages:
                    replica.hooks.log_sample_advantages(
                        batch.ids,
                        batch.mask.sum(1).long(),
                        batch.advantages == 0,
                        pure_advantage_loss=self.pure_advantage_loss,
                    )
        self._allreduce()
        stale = info.stale_ids
        for cell, replica in enumerate(self.replicas):
            if cell == dies:
                self.dead.add(cell)  # never flushed or closed again: its buffer dies with it
                continue
            with replica.hooks.step(step, attempt):
                if discard:
                    replica.hooks.after_discard(stale)
                else:
                    replica.optimizer.step()
                    replica.hooks.after_optimizer_step(stale, checksum=True)
        outcome = "discarded_should_retry" if discard else "normal"
        cells = {c: ranks(outcome if c == 0 else "normal") for c in range(len(self.replicas))}
        if dies is not None:
            cells[dies] = errored()
        return self.driver.end_attempt(step, attempt, cells), info

    def _allreduce(self) -> None:
        """The cross-cell SUM of gradients: every cell applies the whole global batch."""
        params = [list(r.model.parameters()) for r in self.replicas]
        for group in zip(*params, strict=True):
            total = sum(p.grad for p in group if p.grad is not None)
            for p in group:
                if p.grad is not None:
                    p.grad.copy_(total)

    def step(self, step: int, samples: Sequence[int], *, retries: int = 0) -> None:
        for attempt in range(retries + 1):
            accepted, _ = self.attempt(step, attempt, samples, discard=attempt < retries)
            assert accepted == (attempt == retries)

    def checkpoint(self, step: int) -> None:
        for replica in self.replicas:
            with replica.hooks.step(step, 0):
                replica.hooks.save_checkpoint(
                    self.run_dir / f"ckpt{step}.c{replica.hooks.cell}.pt", iteration=step
                )
        self.driver.record_checkpoint(step)

    def die(self) -> None:
        """The job is killed: what was flushed stays, nothing else is logged."""
        for cell, replica in enumerate(self.replicas):
            if cell in self.dead:
                continue
            replica.hooks.flush()
        self.driver.flush()

    def finish(self) -> Report:
        for cell, replica in enumerate(self.replicas):
            if cell not in self.dead:
                replica.hooks.close()
        self.driver.finish()
        return verify(self.run_dir)


def failures(report: Report) -> list[str]:
    """Every error and warning, one line each (empty for a clean run)."""
    return [
        f"{v.code} {v.severity.value} {v.kind}: {v.message}"
        for r in report.results
        for v in r.violations
    ]
