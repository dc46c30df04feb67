"""The committed-history views: ``lineage``, ``committed_steps``, ``committed_metrics``,
``timeline``, ``abandoned_events``. All history DDL of the verifier is here, as constant
SQL (no values are pasted in), so a user's ``ftaudit sql`` and the rules see exactly the
same history.

Committed history (SPEC §1): start from the last incarnation; it contributes its accepted
attempts after its resume point; then the incarnation that saved the checkpoint it
resumed from contributes its accepted attempts up to that checkpoint's iteration, after
its own resume point; and so on back to a fresh start.
"""

from __future__ import annotations

from collections.abc import Collection

import duckdb

from ftaudit.eventlog.sql import ident

HISTORY_VIEWS: dict[str, str] = {
    # One row per incarnation that logged a start: where it resumed from.
    "incarnations": """
        SELECT incarnation,
               min(resumed_from.iteration) AS resumed_iteration,
               min(resumed_from.incarnation) AS resumed_incarnation,
               max(buffer_size) AS buffer_size,
               max(dataset_size) AS dataset_size,
               bool_or(deterministic_order) AS deterministic_order,
               count(*) AS starts,
               min(ts) AS started_at
        FROM run_started
        GROUP BY incarnation""",
    # The chain of incarnations behind the final model. An incarnation contributes the
    # steps in (after_step, up_to_step]; NULL after_step = from step 0, NULL up_to_step =
    # open ended (the final incarnation). depth 0 is the final incarnation.
    "lineage": """
        WITH RECURSIVE chain(incarnation, after_step, up_to_step, next_incarnation, depth) AS (
            SELECT incarnation, resumed_iteration, CAST(NULL AS BIGINT), resumed_incarnation, 0
            FROM incarnations
            WHERE incarnation = (SELECT max(incarnation) FROM incarnations)
            UNION ALL
            SELECT i.incarnation, i.resumed_iteration, c.after_step, i.resumed_incarnation,
                   c.depth + 1
            FROM chain c JOIN incarnations i ON i.incarnation = c.next_incarnation
            WHERE i.incarnation < c.incarnation)
        SELECT incarnation, after_step, up_to_step, depth FROM chain""",
    # Each committed step with its accepted attempt, the incarnation that ran it and the
    # cells' outcomes in that attempt. A step listed twice was committed twice.
    "committed_steps": """
        SELECT s.step, s.accepted_attempt AS attempt, s.incarnation, s.cells,
               s.writer, s.seq, s.ts, s.segment
        FROM step_end s JOIN lineage l ON s.incarnation = l.incarnation
        WHERE s.step > coalesce(l.after_step, -1)
          AND (l.up_to_step IS NULL OR s.step <= l.up_to_step)""",
    # Every metric value of a committed step attempt: values of retried attempts and of
    # rolled-back steps are left out (what `ftaudit export` writes and `compare` compares).
    "committed_metrics": """
        SELECT m.* FROM metrics m
        JOIN (SELECT DISTINCT incarnation, step, attempt FROM committed_steps) c
          USING (incarnation, step, attempt)""",
    # Every (incarnation, step, attempt) any event mentions, and what became of it:
    # committed, retried (the driver tried again), rolled_back (accepted, but a later
    # incarnation resumed from an earlier checkpoint) or unfinished (no step end).
    "timeline": """
        WITH attempts AS (
            SELECT incarnation, step, attempt, count(*) AS events,
                   min(ts) AS first_ts, max(ts) AS last_ts
            FROM events WHERE step IS NOT NULL AND attempt IS NOT NULL
            GROUP BY ALL),
        ends AS (
            SELECT incarnation, step, max(accepted_attempt) AS accepted_attempt
            FROM step_end GROUP BY ALL),
        committed AS (SELECT DISTINCT incarnation, step, attempt FROM committed_steps)
        SELECT a.incarnation, i.resumed_iteration, i.resumed_incarnation,
               a.step, a.attempt, e.accepted_attempt = a.attempt AS accepted,
               c.step IS NOT NULL AS committed,
               CASE WHEN c.step IS NOT NULL THEN 'committed'
                    WHEN e.accepted_attempt IS NULL THEN 'unfinished'
                    WHEN e.accepted_attempt <> a.attempt THEN 'retried'
                    ELSE 'rolled_back' END AS status,
               a.events, a.first_ts, a.last_ts
        FROM attempts a
        LEFT JOIN incarnations i USING (incarnation)
        LEFT JOIN ends e USING (incarnation, step)
        LEFT JOIN committed c USING (incarnation, step, attempt)
        ORDER BY a.incarnation, a.step, a.attempt""",
    # Events of a step attempt that is not in the committed history.
    "abandoned_events": """
        SELECT e.*, t.status
        FROM events e JOIN timeline t USING (incarnation, step, attempt)
        WHERE NOT t.committed""",
}


def create_history_views(con: duckdb.DuckDBPyConnection) -> None:
    """Add the committed-history views to a connection from :func:`ftaudit.eventlog.connect`."""
    for name, select in HISTORY_VIEWS.items():
        con.execute(f"CREATE OR REPLACE VIEW {ident(name)} AS {select}")


KEPT = ("incarnations", "lineage", "committed_steps")
"""The views most rules' queries read, in the order they build on each other."""


KEPT_FROM: dict[str, frozenset[str]] = {
    "incarnations": frozenset({"run_started"}),
    "lineage": frozenset({"run_started"}),
    "committed_steps": frozenset({"run_started", "step_end"}),
}
"""The event types each of :data:`KEPT` is made from (through the ones before it)."""


MOVING = frozenset({"committed_steps"})
"""Of :data:`KEPT`, those a moving window changes at every move: a follower's poll adds
step ends each time. Made again at each poll, ``committed_steps`` cost it 3-4 ms, more
than the queries that read it spend joining a window's few hundred step ends to the
kept ``lineage``: after a move it is read as the view."""


def keep_history(con: duckdb.DuckDBPyConnection, changed: Collection[str] | None = None) -> None:
    """Hold :data:`KEPT` as temporary tables of the same names (they come first in
    DuckDB's search path) until the rows change: every query that read a view planned
    and ran the recursive ``lineage`` again (a follower's poll, 14 ms of its 95 ms of
    queries). Call again after the loaded rows changed, with the event types whose rows
    ``changed`` (None: any, as at the first load): only the tables made from them are
    made again (a live run's poll adds step ends, rarely a start), except those of
    :data:`MOVING`, whose tables are dropped. The views stay what ``ftaudit sql`` reads."""
    stale = [n for n in KEPT if changed is None or KEPT_FROM[n].intersection(changed)]
    for name in stale:  # in order: each is made from the ones before it, made again
        if changed is not None and name in MOVING:
            con.execute(f"DROP TABLE IF EXISTS temp.main.{ident(name)}")
            continue
        # one statement, not a DROP and a CREATE; the view by its full name:
        # ``main.<name>`` is the temporary table itself while it exists
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {ident(name)} AS SELECT * FROM memory.main.{ident(name)}"
        )
