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
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from ftaudit.eventlog.sql import ident

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
            query = f"SELECT {', '.join(map(ident, columns))}, segment FROM {self.event_type}"
            rows = self.rows(ctx, query, segments, label=label)
        return rows

    def trim(self, segment: str, seq: int) -> bool:
        """Forget the rows of ``segment`` before sequence number ``seq`` (the window's cut
        in it moved forward); False where the state cannot, and takes the rows left in
        again instead."""
        return False

    def sync(self, ctx: RunContext) -> None:
        """Make the state that of the rows ``ctx``'s session holds now.

        A segment the window begins inside (a merged one) may hold its rows from another
        row than when the state took them in. Where the cut moved forward (the window
        moving along), the state forgets the rows before it (:meth:`trim`); otherwise the
        segment is taken in again. A roll's merged segment stays cut at every poll until
        the window leaves it (the witness window reaches back a ring's worth of steps),
        and taking it in again at each of those polls doubled their cost."""
        session = ctx.session
        held = session.segments_holding(self.event_type)
        cut = {p: session.rows_from(p, self.event_type) for p in session.cut & held}
        either = (cut.keys() | self.cut.keys()) & self.segments
        moved = set()
        for p in either:
            was, now = self.cut.get(p, 0), cut.get(p, 0)
            if was == now:
                continue
            if was is not None and now is not None and now > was and self.trim(p, now):
                continue  # moved forward: the rows before it forgotten
            moved.add(p)
        for gone in (self.segments - held) | moved:
            self.drop(gone)
        kept = (self.segments & held) - moved
        new = held - kept
        if new:
            self.add(ctx, sorted(new) if kept else None)
        self.segments = held
        self.cut = cut


Item = TypeVar("Item")


def _seq_of(pair: tuple[int, Any]) -> int:
    return pair[0]


class InSeqOrder(Generic[Item]):
    """What a state made of each segment's rows, in sequence order: the rows before a cut
    that moved forward are a prefix, taken off without a walk of the rest."""

    def __init__(self) -> None:
        self._of: dict[str, list[tuple[int, Item]]] = {}
        self._unsorted: set[str] = set()

    def add(self, segment: str, seq: int, item: Item) -> None:
        rows = self._of.setdefault(segment, [])
        if rows and rows[-1][0] > seq:  # a query's rows come in no promised order
            self._unsorted.add(segment)
        rows.append((seq, item))

    def take(self, segment: str, below: int | None = None) -> list[Item]:
        """Take off the items of ``segment``'s rows before ``below`` (None: all of them)."""
        rows = self._of.get(segment)
        if not rows:
            return []
        if below is None:
            del self._of[segment]
            self._unsorted.discard(segment)
            return [item for _, item in rows]
        if segment in self._unsorted:
            rows.sort(key=_seq_of)
            self._unsorted.discard(segment)
        at = bisect_left(rows, below, key=_seq_of)
        out = [item for _, item in rows[:at]]
        del rows[:at]
        if not rows:
            del self._of[segment]
        return out


Key = TypeVar("Key", bound=Hashable)


class NamedBySegment(SegmentFed, Generic[Key]):
    """The keys (attempts, instances...) one event type's rows name, by segment: a key
    stays while some row in the window names it."""

    def __init__(self) -> None:
        super().__init__()
        self.of_segment: dict[str, Counter[Key]] = {}
        """Per segment, the keys its rows name, with how many rows name each."""
        self.named: Counter[Key] = Counter()
        """Every key named, with how many segments name it."""
        self._rows: InSeqOrder[Key] = InSeqOrder()

    def name(self, segment: str, seq: int, key: Key) -> bool:
        """Take in that ``segment``'s row ``seq`` names ``key``; True when no other segment
        did."""
        self._rows.add(segment, seq, key)
        named = self.of_segment.setdefault(segment, Counter())
        named[key] += 1
        if named[key] > 1:
            return False
        self.named[key] += 1
        return self.named[key] == 1

    def drop(self, segment: str) -> None:
        self._rows.take(segment)
        for key in self.of_segment.pop(segment, ()):
            self._unname(key)

    def trim(self, segment: str, seq: int) -> bool:
        gone = self._rows.take(segment, seq)
        if not gone:
            return True
        named = self.of_segment[segment]
        for key in gone:
            named[key] -= 1
            if not named[key]:
                del named[key]
                self._unname(key)
        if not named:
            del self.of_segment[segment]
        return True

    def _unname(self, key: Key) -> None:
        """One segment fewer names ``key``."""
        self.named[key] -= 1
        if not self.named[key]:
            del self.named[key]
            self.forget(key)

    def forget(self, key: Key) -> None:
        """No segment in the window names ``key`` any more (a state that keeps more about
        a key than that it is named lets go of it here)."""
