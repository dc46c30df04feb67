"""Which witness instances each cell snapshotted, kept by a follower between its polls.

Offline, :data:`~ftaudit.verifier.coverage.INSTANCES` asks the loaded run once. A
follower asked it of its window at every poll (4-7 ms: a ``DISTINCT`` over the window's
snapshots joined with the heals) for an answer that changes only when a cell snapshots
another instance or is healed. It keeps here, per segment, the (incarnation, step, cell,
instance) its snapshot rows name, fed only the segments new to its window, and derives
each cell's generations from the heals as the query does.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterator, Mapping

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.segment_state import NamedBySegment

_COLUMNS = ("seq", "incarnation", "step", "cell", "instance")

Seen = tuple[int | None, int | None, int | None, str | None]
"""(incarnation, step, cell, instance) of a snapshot row."""

Slot = tuple[int | None, int | None, str | None]
"""(incarnation, cell, instance)."""


class SnapshotInstances(NamedBySegment[Seen]):
    """The instances each cell snapshotted at each step, by segment."""

    event_type = "witness_snapshot"

    def __init__(self) -> None:
        super().__init__()
        self.steps: dict[Slot, set[int | None]] = {}
        """The steps at which each (incarnation, cell, instance) was snapshotted."""

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        for r in self.fed_rows(ctx, _COLUMNS, segments, label="witness instances seen"):
            key = (r["incarnation"], r["step"], r["cell"], r["instance"])
            if self.name(r["segment"], r["seq"], key):
                self.steps.setdefault((key[0], key[2], key[3]), set()).add(key[1])

    def forget(self, key: Seen) -> None:
        slot = (key[0], key[2], key[3])
        steps = self.steps[slot]
        steps.discard(key[1])
        if not steps:
            del self.steps[slot]

    def generations(
        self, heals: Mapping[tuple[int, int], list[int]]
    ) -> Iterator[tuple[int | None, int | None, str | None, int]]:
        """(incarnation, cell, instance, generation) of every instance a cell snapshotted,
        each once, as :data:`~ftaudit.verifier.coverage.INSTANCES` gives them: a cell's
        generation at a step is how many of its heals (``heals``: sorted steps by
        incarnation and cell) came at or before it."""
        for (incarnation, cell, instance), steps in self.steps.items():
            healed = heals.get((incarnation, cell)) if incarnation is not None else None
            if not healed:  # most cells: one generation, whatever the steps
                yield incarnation, cell, instance, 0
                continue
            found = {0 if step is None else bisect_right(healed, step) for step in steps}
            for generation in sorted(found):
                yield incarnation, cell, instance, generation


__all__ = ["SnapshotInstances"]
