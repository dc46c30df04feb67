"""FT011's counter readings kept between a follower's polls (:class:`CounterLog`).

Offline, ``ft-verify`` and ``--since-step`` pair each reading with the previous one in one
query (:data:`~ftaudit.verifier.rules.ft011_application_count.COUNTER_JUMPS`): over a
whole run that is the fastest way (a Python core for them cost the offline verification
of a 10,000-step run five times FT011's time, day six). A follower's poll asks that
query over its window each time (a fifth of its query time); it keeps the readings here
instead, fed only the segments new to its window, and pairs them in Python: the same
jumps in the same order (``tests/verifier/test_online.py`` holds both to every synth bug).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Collection
from dataclasses import dataclass

from ftaudit.verifier.context import CommittedStep, RunContext
from ftaudit.verifier.rules.rank_rows import RankRow, TrainerRank
from ftaudit.verifier.segment_state import InSeqOrder, SegmentFed

READING_COLUMNS = (
    "incarnation",
    "step",
    "attempt",
    "source_role",
    "cell",
    "rank",
    "seq",
    "counters",
)
"""The columns of each counter reading a rank logged (``step_applied``; one that names no
attempt of a cell, no reading of the committed history, is skipped: :data:`_NAMED`)."""

_NAMED = ("incarnation", "step", "attempt", "cell")


_Logged = tuple[int, int, int, str | None, int, int | None]
"""A reading's (incarnation, step, attempt, source_role, cell, rank): one a rank logs
after each attempt (a second one of the same attempt, the last by sequence number, wins)."""


@dataclass(frozen=True)
class _Row:
    """One logged ``step_applied`` row."""

    seq: int
    segment: str
    counters: dict[str, int | None]


class CounterLog(SegmentFed):
    """The ranks' counter readings, per rank and in step order (see :class:`SegmentFed`).

    Each counter of a reading is checked against the same counter's previous reading of
    the same rank after a committed attempt its cell finished normally (the driver's
    last step end of the attempt): it must have grown by the committed steps between
    them. Which attempts are committed changes when an incarnation resumes from an
    earlier checkpoint, so the readings are all kept, and skipped while judging.

    A rank can sit out longer than a follower's window reaches back (a cell down for many
    steps, then healed): its next reading has no earlier one in the window. So each
    rank's last reading of each counter that counted is carried past the window
    (:attr:`_carried`) while no incarnation resumed from before it.
    """

    event_type = "step_applied"

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[_Logged, list[_Row]] = {}
        self._by_segment: InSeqOrder[_Logged] = InSeqOrder()
        self._steps: dict[TrainerRank, list[tuple[int, int, int]]] = {}
        """Per rank, the (step, incarnation, attempt) of its readings, sorted."""
        self._at: dict[tuple[TrainerRank, tuple[int, int, int]], list[_Logged]] = {}
        self._counted: set[_Logged] = set()
        """The readings found to count (their attempt committed, their cell normal): once
        found, a reading counts until an incarnation resumes from before its step."""
        self._pending: set[_Logged] = set()
        """The readings not found to count yet (their step not committed yet, or never)."""
        self._carried: dict[tuple[TrainerRank, str], tuple[_Logged, _Row]] = {}
        """Per rank and counter, its last reading that counted and left the window."""

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        rows = self.fed_rows(ctx, READING_COLUMNS, segments, label="FT011 readings")
        for r in rows:
            if any(r[name] is None for name in _NAMED):
                continue
            key = (
                r["incarnation"],
                r["step"],
                r["attempt"],
                r["source_role"],
                r["cell"],
                r["rank"],
            )
            logged = self._rows.get(key)
            if logged is None:
                logged = self._rows[key] = []
                self._pending.add(key)
                who, at = _who(key), _order(key)
                if (who, at) not in self._at:
                    insort(self._steps.setdefault(who, []), at)
                self._at.setdefault((who, at), []).append(key)
            items = r["counters"].items() if isinstance(r["counters"], dict) else r["counters"]
            logged.append(_Row(r["seq"], r["segment"], dict(items or ())))
            self._by_segment.add(r["segment"], r["seq"], key)

    def drop(self, segment: str) -> None:
        self._forget(segment, self._by_segment.take(segment), None)

    def trim(self, segment: str, seq: int) -> bool:
        self._forget(segment, self._by_segment.take(segment, seq), seq)
        return True

    def _forget(self, segment: str, keys: list[_Logged], below: int | None) -> None:
        """Forget ``segment``'s rows of ``keys`` (before ``below``; None: all of them)."""
        # a key once: a rank may log an attempt twice in one segment (a step applied twice)
        for key in dict.fromkeys(keys):
            logged = [
                row
                for row in self._rows[key]
                if row.segment != segment or (below is not None and row.seq >= below)
            ]
            if logged:
                self._rows[key] = logged
                continue
            self._carry(key, self._last(key))
            del self._rows[key]
            who, at = _who(key), _order(key)
            same = self._at[(who, at)]
            same.remove(key)
            if not same:
                del self._at[(who, at)]
                steps = self._steps[who]
                del steps[bisect_left(steps, at)]
                if not steps:
                    del self._steps[who]

    def jumps(self, ctx: RunContext) -> list[tuple[str, RankRow, int, RankRow, int]]:
        """Each counter reading from step ``ctx.since`` on that did not grow by the
        committed steps since the previous one: (name, previous, its value, this reading,
        its value), by rank, counter name and step."""
        normal = _NormalCells(ctx.committed)
        out = []
        for who, steps in self._steps.items():
            for i in range(bisect_left(steps, (ctx.since,)), len(steps)):
                for key in self._at[(who, steps[i])]:
                    if _cell_of(key) not in normal:
                        continue
                    row = self._last(key)
                    for name, value in row.counters.items():
                        found = self._previous(who, steps, i, name, normal)
                        if found is None:
                            found = self._before_window(ctx, who, name, steps[i])
                        if found is None:
                            continue
                        prev_key, prev = found
                        prev_value = prev.counters[name]
                        if value is None or prev_value is None:
                            continue
                        if value - prev_value != key[1] - prev_key[1]:
                            out.append(
                                (
                                    name,
                                    _rank_row(who, prev_key, prev),
                                    prev_value,
                                    _rank_row(who, key, row),
                                    value,
                                )
                            )
        out.sort(key=_jump_order)
        found = {key for key in self._pending if _cell_of(key) in normal}
        self._counted |= found
        self._pending -= found
        return out

    def _carry(self, key: _Logged, row: _Row) -> None:
        """Carry a reading that leaves the window, where it counted and is the rank's
        latest of a counter to leave it."""
        self._pending.discard(key)
        if key not in self._counted:
            return
        self._counted.discard(key)
        for name in row.counters:
            held = self._carried.get((_who(key), name))
            if held is None or _order(held[0]) < _order(key):
                self._carried[(_who(key), name)] = (key, row)

    def _before_window(
        self, ctx: RunContext, who: TrainerRank, name: str, at: tuple[int, int, int]
    ) -> tuple[_Logged, _Row] | None:
        """The rank's carried reading of ``name`` from before ``at`` (None: none, or an
        incarnation that resumed from before its step re-ran it: it no longer counts)."""
        held = self._carried.get((who, name))
        if held is None or _order(held[0]) >= at:
            return None
        if ctx.rerun_after(held[0][0], held[0][1]):
            del self._carried[(who, name)]
            return None
        return held

    def _last(self, key: _Logged) -> _Row:
        """The reading of ``key`` that counts: the last one the rank logged."""
        return max(self._rows[key], key=lambda row: row.seq)

    def _previous(
        self,
        who: TrainerRank,
        steps: list[tuple[int, int, int]],
        i: int,
        name: str,
        normal: _NormalCells,
    ) -> tuple[_Logged, _Row] | None:
        """The last reading of ``name`` before ``steps[i]`` that counts (None: none)."""
        for j in range(i - 1, -1, -1):
            for key in self._at[(who, steps[j])]:
                if _cell_of(key) not in normal:
                    continue
                row = self._last(key)
                if name in row.counters:
                    return key, row
        return None


def _who(key: _Logged) -> TrainerRank:
    return TrainerRank(key[3] or "", key[4], key[5])  # type: ignore[arg-type]


def _order(key: _Logged) -> tuple[int, int, int]:
    """Where a reading falls in its rank's series: by step, then incarnation, attempt."""
    return (key[1], key[0], key[2])


def _cell_of(key: _Logged) -> tuple[int, int, int, int]:
    return (key[0], key[1], key[2], key[4])


class _NormalCells:
    """Whether a cell finished a committed attempt normally, by the driver's last step end
    of the attempt: ``(incarnation, step, attempt, cell) in normal``. Looked up per
    reading asked about, not built for every cell of the window's committed steps (a
    window holds many more of them than a poll judges: 3,000 cells a poll, 2 ms)."""

    def __init__(self, committed: list[CommittedStep]) -> None:
        self._last = {s.key: s for s in committed}  # in sequence order: the last stays

    def __contains__(self, cell: tuple[int, int, int, int]) -> bool:
        step = self._last.get(cell[:3])
        if step is None:
            return False
        result = step.cells.get(cell[3])
        return result is not None and result.all_normal


def _rank_row(who: TrainerRank, key: _Logged, row: _Row) -> RankRow:
    return RankRow(who, key[0], key[1], key[2], row.segment, {})


def _jump_order(jump: tuple[str, RankRow, int, RankRow, int]) -> tuple[object, ...]:
    name, _, _, cur, _ = jump
    who = cur.who
    rank = (who.rank is None, who.rank or 0)
    return (who.role, who.cell, rank, name, cur.step, cur.incarnation, cur.attempt)
