"""The rows of a per-rank check: the trainer rank each names, where it points, whether it is judged.

The evidence rules (FT009-FT012) state their invariants per trainer rank: one query per
invariant, whose rows each name a rank ``(role, cell, rank)`` of an incarnation, and a
violation for every row under judgement. This is the part they share: the rank in
words, the violation's location, and which rows an incremental verification
(``--since-step``) may judge, given what it loaded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ftaudit.verifier.findings import Location

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext


@dataclass(frozen=True, order=True)
class TrainerRank:
    """One trainer rank: its ``role`` ('' in a single-role run), ``cell`` and ``rank``."""

    role: str
    cell: int
    rank: int

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> TrainerRank:
        return cls(row.get("role") or "", row["cell"], row["rank"])

    def __str__(self) -> str:
        """``actor cell 1 rank 0`` (``cell 1 rank 0`` without a role)."""
        return f"{self.role} cell {self.cell} rank {self.rank}".lstrip()


@dataclass(frozen=True)
class RankRow:
    """One row of a per-rank query: the rank, the attempt it points at, its segment."""

    who: TrainerRank
    incarnation: int
    step: int | None
    attempt: int | None
    segment: str | None
    values: Mapping[str, Any]
    """The whole row, for the rule's own columns (``row["differ"]``)."""

    def __getitem__(self, column: str) -> Any:
        return self.values[column]

    def location(self, *, instance: str | None = None) -> Location:
        return Location(
            self.step,
            self.attempt,
            self.incarnation,
            cell=self.who.cell,
            rank=self.who.rank,
            instance=instance,
            segment=self.segment,
        )


Loaded = Literal["writer", "step", "incarnation", "run"]
"""What must have been loaded whole for a row to be judged: the row's ``writer``, its
``step``'s events of its incarnation's driver (a window holds every writer's events from
its lookback step on), its incarnation's driver, or the whole run (no incremental window
at all)."""


def judged_rank_rows(
    ctx: RunContext,
    sql: str,
    *,
    label: str,
    at: str = "step",
    in_window: bool = True,
    loaded: Loaded | None = None,
    needs: Collection[str] = (),
) -> list[RankRow]:
    """The rows of ``sql`` a verification may judge, one trainer rank each.

    ``at`` names the column of the step a row points at (``first_step``,
    ``ckpt_iteration``). ``in_window`` leaves out rows about steps before the window
    of an incremental verification (but a follower's late ones:
    :meth:`~ftaudit.verifier.context.RunContext.judges`); ``loaded`` leaves out rows
    whose evidence the window did not load whole (a missing event there is unloaded,
    not absent). The query returns ``incarnation``, ``cell``, ``rank`` and ``segment``;
    ``role`` and ``attempt`` when it knows them.
    """
    out = []
    for r in ctx.rows(sql, label=label, needs=needs):
        step = r[at]
        if in_window and step is not None and not ctx.judges(step, r["segment"]):
            continue
        if not _loaded(ctx, r, loaded, step):
            continue
        out.append(
            RankRow(TrainerRank.of(r), r["incarnation"], step, r.get("attempt"), r["segment"], r)
        )
    return out


def _loaded(
    ctx: RunContext, row: Mapping[str, Any], loaded: Loaded | None, step: int | None
) -> bool:
    if loaded == "writer":
        return ctx.writer_complete(row["writer"])
    if loaded == "step":  # a window holds every writer's events from its lookback on
        inside = ctx.scope is None or (step is not None and step >= ctx.scope.lookback)
        return inside or ctx.incarnation_complete(row["incarnation"])
    if loaded == "incarnation":
        return ctx.incarnation_complete(row["incarnation"])
    if loaded == "run":
        return ctx.scope is None
    return True
