"""Which attempts a follower's trainer evidence is about (FT009's unallocated attempts).

Offline, FT009 finds the attempts with trainer evidence but no allocation in one query
(:data:`~ftaudit.verifier.rules.ft009_restore_evidence.UNALLOCATED_ATTEMPTS`). A
follower asked it at every poll (5-6 ms, a query over four event types of its window)
and found nothing in almost all of them. It keeps here, per segment, the attempts its
trainer rows of those types are about, fed only the segments new to its window; the
query is asked only where one of them has no allocation and its finding could be
reported now.
"""

from __future__ import annotations

from collections.abc import Collection

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.segment_state import NamedBySegment

EVIDENCE_TYPES = (
    "witness_snapshot",
    "witness_gradient",
    "sample_advantage_summary",
    "step_applied",
)
"""Trainer events that exist only because the trainer was given ids for an attempt."""

_COLUMNS = ("seq", "incarnation", "step", "attempt", "source_kind")

Attempt = tuple[int | None, int, int]
"""(incarnation, step, attempt) as a trainer row names it."""


class AttemptKeys(NamedBySegment[Attempt]):
    """The attempts one event type's trainer rows are about, by segment."""

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        for r in self.fed_rows(ctx, _COLUMNS, segments, label="FT009 attempt keys"):
            if r["source_kind"] != "trainer" or r["step"] is None or r["attempt"] is None:
                continue
            self.name(r["segment"], r["seq"], (r["incarnation"], r["step"], r["attempt"]))


KEEPERS: tuple[type[AttemptKeys], ...] = tuple(
    type(f"AttemptKeys_{name}", (AttemptKeys,), {"event_type": name}) for name in EVIDENCE_TYPES
)
"""One state per evidence type (a state follows the rows of one type)."""


def may_be_unallocated(ctx: RunContext) -> bool:
    """Whether a follower's window may hold an attempt with trainer evidence and no
    allocation that this poll judges: at a step under judgement, or named by a segment new
    to this poll (a finding is located at its evidence's first segment, one of those
    naming it). False means the query would find no row a poll reports."""
    allocated = {a.key for a in ctx.allocations}
    new = ctx.session.added_segments
    for keep in KEEPERS:
        state = ctx.kept(keep)
        for key in state.named:
            if key not in allocated and key[1] >= ctx.since:
                return True
        for segment in new & state.of_segment.keys():
            if not state.of_segment[segment].keys() <= allocated:
                return True
    return False
