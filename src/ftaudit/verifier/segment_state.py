"""A rule's state kept between a follower's polls, fed only the segments new to its window.

A query over the loaded window costs a poll milliseconds however few its rows (DuckDB
plans it anew each time: planning a rule's query costs as much as running it over a
window of 200 steps x 16 cells). A rule whose judgement can be carried from one poll to
the next keeps what it made of the rows in a :class:`SegmentFed` state instead: a full
verification builds it from every loaded row at once; a follower of a live run keeps it
(:meth:`~ftaudit.verifier.context.RunContext.kept`) and at each poll feeds it only the
segments new to its window and drops those that left it. So the state always holds what
the window's rows would build, and the rule judges from it the same way in both cases.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext


class SegmentFed(ABC):
    """State built from the loaded rows of one event type, segment by segment."""

    event_type: ClassVar[str]
    """The event type whose rows feed the state."""

    def __init__(self) -> None:
        self.segments: frozenset[str] = frozenset()
        """The segments (paths) whose rows the state holds."""
        self.cut: dict[str, int | None] = {}
        """Of those loaded from a later row than their first, where their rows ran from
        (:meth:`~ftaudit.verifier.session.Session.rows_from`)."""

    @abstractmethod
    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        """Take in the loaded rows of ``segments`` (None: of every loaded segment)."""

    @abstractmethod
    def drop(self, segment: str) -> None:
        """Forget the rows of ``segment`` (it left the window, or only part of it stays)."""

    @staticmethod
    def rows(
        ctx: RunContext, query: str, segments: Collection[str] | None, *, label: str
    ) -> list[dict[str, Any]]:
        """The rows of ``query`` (it selects a ``segment`` column) from ``segments`` (None:
        from every loaded segment)."""
        if segments is None:
            return ctx.rows(query, label=label)
        of = f"SELECT * FROM ({query}) WHERE list_contains($1, segment)"
        return ctx.rows(of, [list(segments)], label=label)

    def added_rows(
        self, ctx: RunContext, columns: Sequence[str], segments: Collection[str] | None
    ) -> list[dict[str, Any]] | None:
        """The ``columns`` of the state's event type's view, and ``segment``, of the rows of
        ``segments`` as the poll that added them decoded them (no query:
        :meth:`~ftaudit.verifier.session.Session.added_rows`); None where it did not add
        them all (the caller asks :meth:`rows`)."""
        if segments is None:
            return None
        return ctx.session.added_rows(self.event_type, columns, segments)

    def fed_rows(
        self,
        ctx: RunContext,
        columns: Sequence[str],
        segments: Collection[str] | None,
        *,
        label: str,
    ) -> list[dict[str, Any]]:
        """The ``columns`` of the state's event type's view, and ``segment``, of the rows of
        ``segments`` (None: of every loaded segment): as the poll that added them decoded
        them where it did (:meth:`added_rows`), else asked of DuckDB (:meth:`rows`)."""
        rows = self.added_rows(ctx, columns, segments)
        if rows is None:
            query = f"SELECT {', '.join(columns)}, segment FROM {self.event_type}"
            rows = self.rows(ctx, query, segments, label=label)
        return rows

    def sync(self, ctx: RunContext) -> None:
        """Make the state that of the rows ``ctx``'s session holds now.

        A segment the window begins inside (a merged one) may hold its rows from another
        row than when the state took them in: it is taken in again."""
        session = ctx.session
        held = session.segments_holding(self.event_type)
        cut = {p: session.rows_from(p, self.event_type) for p in session.cut & held}
        either = (cut.keys() | self.cut.keys()) & self.segments
        moved = {p for p in either if self.cut.get(p, 0) != cut.get(p, 0)}
        for gone in (self.segments - held) | moved:
            self.drop(gone)
        kept = (self.segments & held) - moved
        new = held - kept
        if new:
            self.add(ctx, sorted(new) if kept else None)
        self.segments = held
        self.cut = cut


Key = TypeVar("Key", bound=Hashable)


class NamedBySegment(SegmentFed, Generic[Key]):
    """The keys (attempts, instances...) one event type's rows name, by segment: a key
    stays while some segment in the window names it."""

    def __init__(self) -> None:
        super().__init__()
        self.of_segment: dict[str, set[Key]] = {}
        self.named: Counter[Key] = Counter()
        """Every key named, with how many segments name it."""

    def name(self, segment: str, key: Key) -> bool:
        """Take in that ``segment``'s rows name ``key``; True when no other segment did."""
        named = self.of_segment.setdefault(segment, set())
        if key in named:
            return False
        named.add(key)
        self.named[key] += 1
        return self.named[key] == 1

    def drop(self, segment: str) -> None:
        for key in self.of_segment.pop(segment, ()):
            self.named[key] -= 1
            if not self.named[key]:
                del self.named[key]
                self.forget(key)

    def forget(self, key: Key) -> None:
        """No segment in the window names ``key`` any more (a state that keeps more about
        a key than that it is named lets go of it here)."""
