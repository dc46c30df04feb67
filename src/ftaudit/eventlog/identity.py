"""Who wrote an event: the process identities of a training run."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Identity(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)

    kind: str

    def slug(self) -> str:
        """A short, file-name-safe name, e.g. ``trainer-actor-c1-r0``."""
        return self.kind


class Driver(_Identity):
    kind: Literal["driver"] = "driver"


class RolloutManager(_Identity):
    kind: Literal["rollout_manager"] = "rollout_manager"


class Trainer(_Identity):
    kind: Literal["trainer"] = "trainer"
    role: Literal["actor", "critic"] = "actor"
    cell_index: int = Field(ge=0)
    rank_within_cell: int = Field(ge=0)

    def slug(self) -> str:
        return f"trainer-{self.role}-c{self.cell_index}-r{self.rank_within_cell}"


class Engine(_Identity):
    kind: Literal["engine"] = "engine"
    engine_index: int = Field(ge=0)

    def slug(self) -> str:
        return f"engine-{self.engine_index}"


Identity = Annotated[Driver | RolloutManager | Trainer | Engine, Field(discriminator="kind")]
"""Any process identity; pydantic picks the class from ``kind``."""
