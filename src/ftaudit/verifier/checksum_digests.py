"""The weight checksums a follower keeps between polls (:class:`ChecksumDigests`): what
FT006 and FT010 ask of the loaded ``trainer_weight_checksum`` rows before comparing any
(:class:`ChecksumPoint`), answered with no query over the window."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ftaudit.verifier.segment_state import SegmentFed

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext

COLUMNS = ("incarnation", "step", "attempt", "when", "source_role", "rank", "checkpoint", "hashes")
"""What the state reads of each checksum: its point, the checkpoint it names, its hashes."""


def digest(hashes: Iterable[tuple[str, str]] | Mapping[str, str] | None) -> str | None:
    """A digest of a checksum's hashes: equal digests, equal hashes in the same order (the
    text of a tuple of strings reads back as that tuple alone). Made in Python from the
    rows a poll decoded: asking DuckDB for the digests of the new segments' rows was a
    query at every poll (2.5 ms)."""
    if hashes is None:
        return None
    items = tuple(hashes.items() if isinstance(hashes, Mapping) else hashes)
    return hashlib.sha256(repr(items).encode()).hexdigest()


@dataclass(frozen=True)
class ChecksumPoint:
    """The loaded checksums of one point (``when``):
    :attr:`~ftaudit.verifier.context.RunContext.checksum_points`."""

    count: int
    judged: bool
    """One is at no step or at a step under judgement."""
    saved: bool
    """One names a checkpoint iteration under judgement (``at_save``: its own step)."""


_Point = tuple[int, int | None, int | None, str, str, int]
"""(incarnation, step, attempt, when, role, rank): the checksums compared across cells."""


@dataclass(frozen=True)
class _Logged:
    """One checksum row, as much of it as the state needs."""

    point: _Point
    saved_at: int | None
    digest: str | None


class ChecksumDigests(SegmentFed):
    """The digests of a follower's checksums, by point (see :class:`SegmentFed`).

    Where every checksum of each point under judgement holds the very same hashes, no
    comparison of the point can find a difference, and a follower's poll asks nothing
    more of them: the cross-replica comparison (two queries over the window, most of
    FT006's cost in a poll) runs only when some point holds two different ones. What a
    rule asks of each point first (:meth:`points_of`) is answered from the same rows.
    """

    event_type = "trainer_weight_checksum"

    def __init__(self) -> None:
        super().__init__()
        self._digests: dict[_Point, Counter[str | None]] = {}
        self._by_segment: dict[str, list[_Logged]] = {}

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        for r in self.fed_rows(ctx, COLUMNS, segments, label="FT006 checksums"):
            role = r["source_role"] if r["source_role"] is not None else ""
            point = (r["incarnation"], r["step"], r["attempt"], r["when"], role, r["rank"])
            found = digest(r["hashes"])
            self._digests.setdefault(point, Counter())[found] += 1
            checkpoint = r["checkpoint"]
            saved_at = checkpoint["iteration"] if checkpoint is not None else None
            logged = _Logged(point, saved_at, found)
            self._by_segment.setdefault(r["segment"], []).append(logged)

    def drop(self, segment: str) -> None:
        for logged in self._by_segment.pop(segment, ()):
            seen = self._digests[logged.point]
            seen[logged.digest] -= 1
            if not seen[logged.digest]:
                del seen[logged.digest]
            if not seen:
                del self._digests[logged.point]

    @property
    def points(self) -> int:
        """How many points the checksums are at (FT006's ``POINTS``)."""
        return len(self._digests)

    def all_alike(self, since: int) -> bool:
        """Whether every point from step ``since`` on (or at no step) compared across
        cells holds one digest only."""
        return all(
            len(seen) == 1
            for (_, step, _, when, _, _), seen in self._digests.items()
            if when != "after_heal" and (step is None or step >= since)
        )

    def points_of(self, since: int, late: Collection[str]) -> dict[str, ChecksumPoint]:
        """Per ``when``, what :data:`~ftaudit.verifier.context.CHECKSUM_POINTS` finds:
        how many checksums, whether one is at no step or at step ``since`` or later, and
        whether one names (or, saved, is at) a checkpoint iteration from ``since`` on or
        came in a segment of ``late``."""
        count: Counter[str] = Counter()
        judged: set[str] = set()
        saved: set[str] = set()
        for segment, rows in self._by_segment.items():
            came_late = segment in late
            for logged in rows:
                step, when = logged.point[1], logged.point[3]
                count[when] += 1
                if step is None or step >= since:
                    judged.add(when)
                at = logged.saved_at if logged.saved_at is not None else step
                if came_late or (at is not None and at >= since):
                    saved.add(when)
        return {w: ChecksumPoint(n, w in judged, w in saved) for w, n in count.items()}


__all__ = ["COLUMNS", "ChecksumDigests", "ChecksumPoint", "digest"]
