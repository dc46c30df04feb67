"""FT011 application-count."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

from ftaudit.verifier.context import CommittedStep, RunContext
from ftaudit.verifier.findings import Violation
from ftaudit.verifier.rules.base import MAX_IDS, Rule, RuleOutcome
from ftaudit.verifier.rules.rank_rows import RankRow, TrainerRank, judged_rank_rows
from ftaudit.verifier.segment_state import SegmentFed
from ftaudit.verifier.spans import Spans, union_all

GRADIENTS = """
    SELECT incarnation, step, attempt, coalesce(source_role, '') AS role, cell, rank, instance,
           nonzero_ids, min(segment) AS segment
    FROM witness_gradient GROUP BY ALL
    ORDER BY incarnation, step, attempt, role, cell, rank, instance"""

GRADIENT_IDS = """
    SELECT DISTINCT incarnation, step, attempt, nonzero_ids FROM witness_gradient"""

READINGS = """
    SELECT incarnation, step, attempt, source_role, cell, rank, seq, segment, counters
    FROM step_applied
    WHERE incarnation IS NOT NULL AND step IS NOT NULL AND attempt IS NOT NULL
      AND cell IS NOT NULL"""
"""Every counter reading a rank logged after an attempt (one that names no attempt of a
cell is no reading of the committed history)."""

READINGS_OF = READINGS + " AND list_contains($1, segment)"
"""The readings of some segments: those new to a follower's window."""


CHECKED = """
    SELECT (SELECT count(*) FROM witness_gradient) + (SELECT count(*) FROM step_applied) AS n"""


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
    """

    event_type = "step_applied"

    def __init__(self) -> None:
        super().__init__()
        self._rows: dict[_Logged, list[_Row]] = {}
        self._by_segment: dict[str, list[_Logged]] = {}
        self._steps: dict[TrainerRank, list[tuple[int, int, int]]] = {}
        """Per rank, the (step, incarnation, attempt) of its readings, sorted."""
        self._at: dict[tuple[TrainerRank, tuple[int, int, int]], list[_Logged]] = {}

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        if segments is None:
            rows = ctx.rows(READINGS, label="FT011 readings")
        else:
            rows = ctx.rows(READINGS_OF, [list(segments)], label="FT011 readings")
        for r in rows:
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
                who, at = _who(key), _order(key)
                if (who, at) not in self._at:
                    insort(self._steps.setdefault(who, []), at)
                self._at.setdefault((who, at), []).append(key)
            items = r["counters"].items() if isinstance(r["counters"], dict) else r["counters"]
            logged.append(_Row(r["seq"], r["segment"], dict(items or ())))
            self._by_segment.setdefault(r["segment"], []).append(key)

    def drop(self, segment: str) -> None:
        # a key once: a rank may log an attempt twice in one segment (a step applied twice)
        for key in dict.fromkeys(self._by_segment.pop(segment, ())):
            logged = [row for row in self._rows[key] if row.segment != segment]
            if logged:
                self._rows[key] = logged
                continue
            del self._rows[key]
            who, at = _who(key), _order(key)
            keys = self._at[(who, at)]
            keys.remove(key)
            if not keys:
                del self._at[(who, at)]
                steps = self._steps[who]
                del steps[bisect_left(steps, at)]
                if not steps:
                    del self._steps[who]

    def jumps(self, ctx: RunContext) -> list[tuple[str, RankRow, int, RankRow, int]]:
        """Each counter reading from step ``ctx.since`` on that did not grow by the
        committed steps since the previous one: (name, previous, its value, this reading,
        its value), by rank, counter name and step."""
        normal = _normal_cells(ctx.committed)
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
        return out

    def _last(self, key: _Logged) -> _Row:
        """The reading of ``key`` that counts: the last one the rank logged."""
        return max(self._rows[key], key=lambda row: row.seq)

    def _previous(
        self,
        who: TrainerRank,
        steps: list[tuple[int, int, int]],
        i: int,
        name: str,
        normal: set[tuple[int, int, int, int]],
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


def _normal_cells(committed: list[CommittedStep]) -> set[tuple[int, int, int, int]]:
    """(incarnation, step, attempt, cell) of each cell that finished a committed attempt
    normally, by the driver's last step end of the attempt."""
    last = {s.key: s for s in committed}  # in sequence order: the last one stays
    return {
        (*key, cell)
        for key, s in last.items()
        for cell, result in s.cells.items()
        if result.all_normal
    }


def _rank_row(who: TrainerRank, key: _Logged, row: _Row) -> RankRow:
    return RankRow(who, key[0], key[1], key[2], row.segment, {})


def _jump_order(jump: tuple[str, RankRow, int, RankRow, int]) -> tuple[object, ...]:
    name, _, _, cur, _ = jump
    who = cur.who
    rank = (who.rank is None, who.rank or 0)
    return (who.role, who.cell, rank, name, cur.step, cur.incarnation, cur.attempt)


@dataclass(frozen=True)
class _Reading:
    """One counter of one rank after a committed step."""

    at: RankRow
    value: int

    def grew(self, prev: _Reading) -> int:
        return self.value - prev.value

    def steps(self, prev: _Reading) -> int:
        """Committed steps since ``prev``: what the counter must have grown by."""
        return self.at.step - prev.at.step  # type: ignore[operator]


class ApplicationCount(Rule):
    """Each committed step is applied once: own ids in its gradient, counters grow by one.

    Gradient: the ``witness_gradient`` rows a rank logs after the all-reduce and before
    the optimizer step are all ids of that attempt's allocation. A row of an earlier
    attempt is a gradient that was never cleared (``zero_grad`` skipped) and is applied a
    second time; the witness alone cannot see it, because that row is nonzero anyway.
    Counters: along the committed history, on every rank of every cell whose outcome was
    normal, each counter of ``step_applied`` (the optimizer's own step count, a
    registered scheduler's ``last_epoch``) grows by exactly the number of committed steps
    between two readings, across retries, heals and resumes. More means a step applied
    twice (the optimizer stepped twice, a replay onto weights that already had it, a
    discarded attempt committed anyway); less, or a counter that went back, means a step
    never applied or state that was not restored (a scheduler that restarted).

    Fails::

        step 3: witness_allocated ids [6, 7]; witness_gradient cell 0 [4, 5, 6, 7]
        -> FT011: the gradient of step 3 holds ids [4, 5] of another attempt

        step 3: step_applied cell 0 {optimizer: 4}; step 4: {optimizer: 6}
        -> FT011: the optimizer counter grew by 2 over 1 committed step

    Passes::

        step 3: witness_gradient cell 0 [6, 7]; step_applied {optimizer: 4}
        step 4: step_applied {optimizer: 5}
    """

    code = "FT011"
    name = "application-count"
    kinds: ClassVar[dict[str, str]] = {
        "gradient_not_cleared": "a committed gradient holds ids of another attempt",
        "applied_twice": "a step counter grew by more than the committed steps",
        "never_applied": "a step counter grew by less than the committed steps",
        "counter_went_back": "a step counter decreased: its state was not restored",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        checked = ctx.rows(CHECKED, label="FT011 checked")[0]["n"]
        return RuleOutcome(checked, tuple(self._gradients(ctx) + self._counters(ctx)))

    def _gradients(self, ctx: RunContext) -> list[Violation]:
        logged: dict[tuple[int, int, int], list[Spans]] = {}
        for a in ctx.allocations:
            logged.setdefault(a.key, []).append(Spans.from_runs(a.witness_ids))
        allocated = {key: union_all(spans) for key, spans in logged.items()}
        # every cell and instance of an attempt usually logs the same ids: one difference
        # per distinct (attempt, ids), and the rows (a Python object each: 350 k at
        # 10,000 steps x 16 cells) are read only when one of them holds extra ids
        extras: dict[tuple[object, ...], Spans] = {}
        for r in ctx.rows(GRADIENT_IDS, label="FT011 gradient ids"):
            key = (r["incarnation"], r["step"], r["attempt"])
            own = allocated.get(key)
            if own is not None:
                extras[_ids_key(key, r["nonzero_ids"])] = Spans.from_column(r["nonzero_ids"]) - own
        if not any(extras.values()):
            return []
        out = []
        for r in judged_rank_rows(ctx, GRADIENTS, label="FT011 gradients"):
            key = (r.incarnation, r.step, r.attempt)
            if key not in allocated:
                continue  # no allocation at all: FT009 reports the attempt
            extra = extras[_ids_key(key, r["nonzero_ids"])]
            if not extra:
                continue
            out.append(
                self.violation(
                    f"the witness gradient of {r.who} ({r['instance']}) in step {r.step} "
                    f"attempt {r.attempt} of incarnation {r.incarnation} holds {len(extra)} "
                    f"id(s) that this attempt did not allocate {extra.describe()}: gradient "
                    "of an earlier attempt was never cleared (zero_grad skipped?) and is "
                    "applied a second time",
                    kind="gradient_not_cleared",
                    location=r.location(instance=r["instance"]),
                    ids=extra.head(MAX_IDS).tolist(),
                    id_count=len(extra),
                )
            )
        return out

    def _counters(self, ctx: RunContext) -> list[Violation]:
        return [
            self._counter_violation(name, _Reading(prev, prev_value), _Reading(cur, value))
            for name, prev, prev_value, cur, value in ctx.kept(CounterLog).jumps(ctx)
        ]

    def _counter_violation(self, name: str, prev: _Reading, cur: _Reading) -> Violation:
        grew, steps = cur.grew(prev), cur.steps(prev)
        if grew > steps:
            kind = "applied_twice"
            meaning = (
                f"{grew - steps} application(s) too many: a step was applied twice (the "
                "optimizer stepped twice, a replay onto weights that already had it, or a "
                "discarded attempt committed anyway)"
            )
        elif grew < 0:
            kind = "counter_went_back"
            meaning = "the counter went back: its state was not restored (it restarted)"
        else:
            kind = "never_applied"
            meaning = f"{steps - grew} committed step(s) never applied"
        return self.violation(
            f"the {name} counter of {cur.at.who} went from {prev.value} after step "
            f"{prev.at.step} (incarnation {prev.at.incarnation}) to {cur.value} after step "
            f"{cur.at.step} (incarnation {cur.at.incarnation}): it must grow by {steps} over "
            f"{steps} committed step(s); {meaning}",
            kind=kind,
            location=cur.at.location(),
        )


def _ids_key(attempt: tuple[object, ...], ids: dict[str, list[int]] | None) -> tuple[object, ...]:
    """An attempt and its logged gradient ids, hashable."""
    return (attempt, tuple(ids["starts"]), tuple(ids["lengths"])) if ids else (attempt,)
