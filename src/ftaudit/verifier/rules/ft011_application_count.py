"""FT011 application-count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Violation
from ftaudit.verifier.rules.base import MAX_IDS, Rule, RuleOutcome
from ftaudit.verifier.rules.counter_log import CounterLog
from ftaudit.verifier.rules.rank_rows import RankRow, TrainerRank, judged_rank_rows
from ftaudit.verifier.spans import Bands, Spans, spans_of_rows, union_all

GRADIENTS = """
    SELECT incarnation, step, attempt, coalesce(source_role, '') AS role, cell, rank, instance,
           nonzero_ids, min(segment) AS segment
    FROM witness_gradient GROUP BY ALL
    ORDER BY incarnation, step, attempt, role, cell, rank, instance"""

GRADIENT_IDS = """
    SELECT DISTINCT incarnation, step, attempt, nonzero_ids FROM witness_gradient"""

COUNTER_JUMPS = """
    WITH last_end AS (
        SELECT incarnation, step, attempt, cells FROM committed_steps
        QUALIFY row_number() OVER (PARTITION BY incarnation, step, attempt ORDER BY seq DESC) = 1),
    outcomes AS (
        SELECT incarnation, step, attempt, unnest(map_keys(cells)) AS cell,
               unnest(map_values(cells)) AS result
        FROM last_end),
    normal AS (
        SELECT incarnation, step, attempt, cell FROM outcomes
        WHERE NOT coalesce(result.errored, false) AND len(result.ranks) > 0
          AND list_bool_and(list_transform(result.ranks, lambda r: r = 'normal'))),
    readings AS (
        SELECT incarnation, step, attempt, coalesce(source_role, '') AS role, cell, rank,
               segment, counters
        FROM step_applied
        QUALIFY row_number() OVER (PARTITION BY incarnation, step, attempt, source_role,
                                                cell, rank ORDER BY seq DESC) = 1),
    series AS (
        SELECT r.incarnation, r.step, r.attempt, r.role, r.cell, r.rank, r.segment,
               unnest(map_keys(r.counters)) AS name, unnest(map_values(r.counters)) AS value
        FROM readings r JOIN normal n USING (incarnation, step, attempt, cell)),
    paired AS (
        SELECT *, lag(value) OVER w AS prev_value, lag(step) OVER w AS prev_step,
               lag(attempt) OVER w AS prev_attempt, lag(incarnation) OVER w AS prev_incarnation,
               lag(segment) OVER w AS prev_segment
        FROM series
        WINDOW w AS (PARTITION BY role, cell, rank, name ORDER BY step, incarnation, attempt))
    SELECT * FROM paired
    WHERE prev_step IS NOT NULL AND value - prev_value <> step - prev_step AND step >= ?
    ORDER BY role, cell, rank, name, step, incarnation, attempt"""
"""Each counter reading of a rank after a committed attempt that its cell finished
normally (the rank's last ``step_applied`` of the attempt; the driver's last step end of
it), against the rank's previous such reading of the same counter, where the counter did
not grow by the committed steps between them: only the jumps, from the first step under
judgement on. Every loaded reading counts as a previous one, also before the steps under
judgement: an incremental window loads them from ``T`` on (``incremental.WINDOW_TYPES``:
a rank whose cell crashed and was healed grows from its reading before the gap)."""


CHECKED = """
    SELECT (SELECT count(*) FROM witness_gradient) + (SELECT count(*) FROM step_applied) AS n"""


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
        checked = ctx.count(CHECKED, label="FT011 checked")
        return RuleOutcome(checked, tuple(self._gradients(ctx) + self._counters(ctx)))

    def _gradients(self, ctx: RunContext) -> list[Violation]:
        logged: dict[tuple[int, int, int], list[Spans]] = {}
        for a in ctx.allocations:
            logged.setdefault(a.key, []).append(Spans.from_runs(a.witness_ids))
        allocated = {key: union_all(spans) for key, spans in logged.items()}
        if not _foreign_ids(ctx, allocated):  # the usual run: no row to look at
            return []
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
        _ = ctx.committed  # a driver's cells that cannot be read fail here, as in every rule
        if ctx.following:  # the readings kept since the last poll: no query over the window
            return [
                self._counter_violation(name, _Reading(prev, prev_value), _Reading(cur, value))
                for name, prev, prev_value, cur, value in ctx.kept(CounterLog).jumps(ctx)
            ]
        out = []
        for r in ctx.rows(COUNTER_JUMPS, [ctx.since], label="FT011 counters"):
            who = TrainerRank.of(r)
            prev = RankRow(
                who, r["prev_incarnation"], r["prev_step"], r["prev_attempt"], r["prev_segment"], r
            )
            cur = RankRow(who, r["incarnation"], r["step"], r["attempt"], r["segment"], r)
            out.append(
                self._counter_violation(
                    r["name"], _Reading(prev, int(r["prev_value"])), _Reading(cur, int(r["value"]))
                )
            )
        return out

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


def _foreign_ids(ctx: RunContext, allocated: dict[tuple[int, int, int], Spans]) -> bool:
    """Whether a distinct gradient row holds an id its attempt did not allocate, for all
    rows in one pass (:class:`~ftaudit.verifier.spans.Bands`): row by row it is a set
    difference of a span or two, where numpy's cost per call is most of the work (11,000
    rows at 10,000 steps, 0.3 s with the rows' Python values)."""
    table = ctx.session.query(GRADIENT_IDS, label="FT011 gradient ids")
    if not table.num_rows:
        return False
    keys = zip(*(table[c].to_pylist() for c in ("incarnation", "step", "attempt")), strict=True)
    nonzero = spans_of_rows(table["nonzero_ids"].combine_chunks())
    pairs = [(n, allocated[k]) for k, n in zip(keys, nonzero, strict=True) if k in allocated]
    logged = [n for n, _ in pairs if n]
    if not logged:
        return False
    ids = [*logged, *(own for _, own in pairs if own)]
    low = min(int(s.starts[0]) for s in ids)
    bands = Bands(low, max(int(s.ends[-1]) for s in ids) - low + 1)
    if not bands.fits(len(pairs)):
        return True  # the rows are compared one by one
    gradient, _ = bands.lay([n for n, _ in pairs])
    own, _ = bands.lay([own for _, own in pairs])
    return bool(gradient - own)


def _ids_key(attempt: tuple[object, ...], ids: dict[str, list[int]] | None) -> tuple[object, ...]:
    """An attempt and its logged gradient ids, hashable."""
    return (attempt, tuple(ids["starts"]), tuple(ids["lengths"])) if ids else (attempt,)
