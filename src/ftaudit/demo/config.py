"""The demo's settings: one frozen dataclass, passed as JSON to the job process and the cells."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Literal

Objective = Literal["rl", "lm"]


@dataclass(frozen=True)
class ModelConfig:
    """A tiny causal transformer: small enough that a step takes milliseconds on one core."""

    vocab_size: int = 48
    hidden: int = 32
    layers: int = 2
    heads: int = 2
    mlp_ratio: int = 2


@dataclass(frozen=True)
class DataConfig:
    """The generated corpus and the shape of a global batch.

    RL: ``prompts_per_step`` prompts with ``samples_per_prompt`` completions each (a GRPO
    group); LM: ``prompts_per_step * samples_per_prompt`` corpus windows.
    """

    corpus_tokens: int = 20_000
    prompt_len: int = 8
    completion_len: int = 8
    prompts_per_step: int = 4
    samples_per_prompt: int = 4

    @property
    def samples_per_step(self) -> int:
        return self.prompts_per_step * self.samples_per_prompt

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.completion_len


@dataclass(frozen=True)
class DemoConfig:
    """Everything one demo run needs; ``to_json`` / ``from_json`` cross process boundaries."""

    run_dir: str
    cells: int = 2
    steps: int = 10
    seed: int = 0
    objective: Objective = "rl"
    buffer_size: int = 128
    """Witness ring size B: B - keep (30%, 39 ids) must hold one attempt's ids (16); cells
    clear a discarded attempt's stale slots, so a step may be retried any number of times.
    Small, so the ring wraps during the run and recycling is tested."""
    checkpoint_every: int = 3
    """Save after every step s with (s + 1) % checkpoint_every == 0."""
    lr: float = 1e-2
    heartbeat_timeout_s: float = 10.0
    """A cell whose training thread made no progress for this long is declared hung. Well
    above a step's time on a loaded machine: at 2 s, cores shared by a dozen processes made
    healthy cells look hung, and killing every cell of a step failed the run."""
    collective_timeout_s: float = 30.0
    """Gloo timeout; longer than the heartbeat so a hang is found by the heartbeat first."""
    faults_json: str = "{}"
    """The fault schedule (:class:`ftaudit.demo.schedule.DemoSchedule` as JSON)."""
    bug: str | None = None
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> DemoConfig:
        raw = json.loads(text)
        return cls(
            **{k: v for k, v in raw.items() if k not in ("model", "data")},
            model=ModelConfig(**raw["model"]),
            data=DataConfig(**raw["data"]),
        )

    def with_(self, **changes: object) -> DemoConfig:
        return replace(self, **changes)  # type: ignore[arg-type]
