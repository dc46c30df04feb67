"""The attempts after which the trainers cleared the ring (FT003), kept by a follower.

Offline, FT003 asks :data:`CLEARS` of the loaded run once. A follower asked it of its
window at every poll (4-5 ms: a ``UNION`` over three event types) for an answer a poll
changes by a few rows. It keeps here, per segment, the attempts each type's rows name,
fed only the segments new to its window.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import ClassVar

from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.segment_state import NamedBySegment

CLEARS = """
    SELECT incarnation, step, accepted_attempt AS attempt FROM step_end
    UNION SELECT incarnation, step, attempt FROM attempt_end WHERE accepted
    UNION SELECT incarnation, step, attempt FROM witness_cleared"""
"""The attempts after which the trainers zeroed the allocation's stale slots: every
accepted attempt (its normal cells clear after the optimizer step) and every discarded
attempt whose ranks logged ``witness_cleared``."""


class _Clears(NamedBySegment[StepKey]):
    """The attempts one event type's rows name as cleared, by segment."""

    attempt: ClassVar[str]
    """The column naming the attempt."""
    only_if: ClassVar[str | None]
    """A column that must be true for a row to count (None: every row counts)."""

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        columns = (
            "seq",
            "incarnation",
            "step",
            self.attempt,
            *([self.only_if] if self.only_if else []),
        )
        for r in self.fed_rows(ctx, columns, segments, label="FT003 clears of segments"):
            if self.only_if is None or r[self.only_if] is True:
                key = (r["incarnation"], r["step"], r[self.attempt])
                self.name(r["segment"], r["seq"], key)


KEEPERS: tuple[type[_Clears], ...] = tuple(
    type(f"Clears_{name}", (_Clears,), {"event_type": name, "attempt": attempt, "only_if": only})
    for name, attempt, only in (
        ("step_end", "accepted_attempt", None),
        ("attempt_end", "attempt", "accepted"),
        ("witness_cleared", "attempt", None),
    )
)
"""One state per type of :data:`CLEARS` (a state follows the rows of one type)."""


def cleared_attempts(ctx: RunContext) -> set[StepKey]:
    """The (incarnation, step, attempt) rows of :data:`CLEARS` over the loaded rows."""
    if not ctx.following:
        return {
            (r["incarnation"], r["step"], r["attempt"])
            for r in ctx.rows(CLEARS, label="FT003 clears")
        }
    out: set[StepKey] = set()
    for keep in KEEPERS:
        out.update(ctx.kept(keep).named)
    return out


__all__ = ["CLEARS", "KEEPERS", "cleared_attempts"]
