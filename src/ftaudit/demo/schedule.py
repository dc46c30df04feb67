"""The demo's fault schedule: the hooks' process faults plus gradient discards.

Process faults (kill, exit, hang) are the trainer hooks' :class:`FaultSpec`, fired by
their :class:`FaultInjector` at named call sites of the cell and the driver:

- cell ``before_allreduce``: after backward, before gradients are exchanged (the peers'
  all-reduce fails, every survivor discards, the attempt is retried with fresh ids);
- cell ``after_commit``: after the commit vote and the optimizer step (the survivors
  already hold the whole update; the attempt is accepted);
- cell ``after_step``: after the step ends (an ``exit`` with code 0 is a stopped cell);
- driver ``mid_step``: after the cells trained, before the step end is logged (the whole
  job dies; ``ftaudit demo`` restarts it from the latest checkpoint).

A discard is not a process fault: the cell finds a non-finite loss and votes to discard
the attempt, as trainers do after a bad rollout.

A quorum timeout is not one either: the cell's torchft quorum deadline expires while its
peers are slow to ask (they hold their asks until the driver saw the deadline pass), so
torchft raises in the cell's ``start_quorum`` and the driver replaces the cell.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field

from ftaudit.trainer_hooks.faults import FaultSchedule, FaultSpec

CELL_SITES = ("before_allreduce", "after_commit", "after_step")
DRIVER_SITES = ("mid_step",)


class DiscardSpec(BaseModel):
    """A cell whose loss is non-finite at ``step``/``attempt``: it votes to discard."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int = Field(ge=0)
    cell: int = Field(ge=0)
    attempt: int = Field(default=0, ge=0)
    incarnation: int = Field(default=0, ge=0)


class QuorumTimeoutSpec(BaseModel):
    """``cell``'s torchft quorum at ``step``/``attempt`` times out: its peers ask only
    after the driver saw it fail (needs two cells or more)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: int = Field(ge=0)
    cell: int = Field(ge=0)
    attempt: int = Field(default=0, ge=0)
    incarnation: int = Field(default=0, ge=0)


class DemoSchedule(BaseModel):
    """Every fault of one demo run.

    JSON: ``{"faults": [...], "discards": [...], "quorum_timeouts": [...]}``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    faults: tuple[FaultSpec, ...] = ()
    discards: tuple[DiscardSpec, ...] = ()
    quorum_timeouts: tuple[QuorumTimeoutSpec, ...] = ()

    @classmethod
    def parse(cls, text: str) -> DemoSchedule:
        """A schedule from JSON text: an object as above, or a bare list of process faults."""
        data = json.loads(text)
        if isinstance(data, list):
            data = {"faults": data}
        schedule = cls.model_validate(data)
        schedule.check_sites()
        return schedule

    def check_sites(self) -> None:
        """Refuse call sites no code fires, so a typo cannot silently disable a fault."""
        for f in self.faults:
            sites = DRIVER_SITES if f.target == "driver" else CELL_SITES
            if f.target not in ("trainer", "driver"):
                raise ValueError(f"the demo has no {f.target!r} process: {f}")
            if f.at not in sites:
                raise ValueError(
                    f"fault at {f.at!r} never fires for a {f.target}: use one of {sites}"
                )

    def process_faults(self) -> FaultSchedule:
        return FaultSchedule(faults=self.faults)

    def discards_now(self, *, step: int, attempt: int, cell: int, incarnation: int) -> bool:
        return any(
            d.step == step
            and d.attempt == attempt
            and d.cell == cell
            and d.incarnation == incarnation
            for d in self.discards
        )

    def quorum_times_out(self, *, step: int, attempt: int, cell: int, incarnation: int) -> bool:
        """Whether ``cell``'s quorum deadline expires at this attempt."""
        return any(
            (q.step, q.attempt, q.cell, q.incarnation) == (step, attempt, cell, incarnation)
            for q in self.quorum_timeouts
        )

    def holds_quorum(self, *, step: int, attempt: int, cell: int, incarnation: int) -> bool:
        """Whether ``cell`` holds its ask at this attempt: a peer's quorum times out (and
        its own does not)."""
        at = {"step": step, "attempt": attempt, "incarnation": incarnation}
        return not self.quorum_times_out(cell=cell, **at) and any(
            (q.step, q.attempt, q.incarnation) == (step, attempt, incarnation)
            for q in self.quorum_timeouts
        )

    def job_kill_steps(self) -> list[int]:
        return sorted(f.step for f in self.faults if f.target == "driver")

    def to_json(self) -> str:
        return self.model_dump_json(exclude_defaults=False)


def default_schedule(cells: int = 2) -> DemoSchedule:
    """The faults ``ftaudit demo`` injects unless told otherwise (needs ``--steps >= 8``).

    With checkpoints after steps 2 and 5 this kills a cell before and after the gradient
    exchange, hangs one, makes one discard, stops one (healed at the next step), and kills
    the whole job in step 7, which then resumes from checkpoint 5. A single cell has no
    peer to heal from, so it only gets the discard and the job kill.
    """
    job_kill = FaultSpec(step=7, mode="sigkill", target="driver", at="mid_step")
    if cells < 2:
        return DemoSchedule(faults=(job_kill,), discards=(DiscardSpec(step=4, cell=0),))
    return DemoSchedule(
        faults=(
            FaultSpec(step=1, mode="sigkill", cell=1, at="before_allreduce"),
            FaultSpec(step=2, mode="sigkill", cell=0, at="after_commit"),
            FaultSpec(step=3, mode="hang", cell=1, at="before_allreduce"),
            FaultSpec(step=6, mode="exit", exit_code=0, cell=1, at="after_step"),
            job_kill,
        ),
        discards=(DiscardSpec(step=4, cell=1),),
    )
