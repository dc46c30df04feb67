"""FT007 engine-checksums."""

from __future__ import annotations

from typing import ClassVar

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location
from ftaudit.verifier.rules.base import Rule, RuleOutcome, name_list

ENGINE_DIFFS = """
    WITH e AS (
        SELECT incarnation, step, attempt, segment,
               unnest(map_keys(engines)) AS engine, unnest(map_values(engines)) AS tensors
        FROM engine_weight_checksum),
    t AS (
        SELECT incarnation, step, attempt, engine, segment,
               unnest(map_keys(tensors)) AS tensor, unnest(map_values(tensors)) AS hash
        FROM e),
    g AS (SELECT *, min(engine) OVER (PARTITION BY incarnation, step, attempt) AS ref_engine
          FROM t),
    m AS (SELECT * FROM g WHERE engine <> ref_engine),
    r AS (SELECT * FROM g WHERE engine = ref_engine),
    others AS (SELECT DISTINCT incarnation, step, attempt, engine, ref_engine FROM m),
    x AS (SELECT o.incarnation, o.step, o.attempt, o.engine, o.ref_engine, r.tensor, r.hash
          FROM others o JOIN r ON r.incarnation = o.incarnation
           AND r.step IS NOT DISTINCT FROM o.step AND r.attempt IS NOT DISTINCT FROM o.attempt),
    d AS (SELECT coalesce(m.incarnation, x.incarnation) AS incarnation,
                 coalesce(m.step, x.step) AS step, coalesce(m.attempt, x.attempt) AS attempt,
                 coalesce(m.engine, x.engine) AS engine,
                 coalesce(m.ref_engine, x.ref_engine) AS ref_engine,
                 coalesce(m.tensor, x.tensor) AS tensor, m.hash AS mh, x.hash AS rh, m.segment
          FROM m FULL JOIN x
            ON m.incarnation = x.incarnation AND m.step IS NOT DISTINCT FROM x.step
           AND m.attempt IS NOT DISTINCT FROM x.attempt AND m.engine = x.engine
           AND m.tensor = x.tensor)
    SELECT incarnation, step, attempt, engine, ref_engine, min(segment) AS segment,
           list(tensor ORDER BY tensor) FILTER (mh <> rh) AS differ,
           list(tensor ORDER BY tensor) FILTER (rh IS NULL) AS only_mine,
           list(tensor ORDER BY tensor) FILTER (mh IS NULL) AS only_ref
    FROM d GROUP BY ALL
    HAVING count(*) FILTER (mh IS DISTINCT FROM rh) > 0
    ORDER BY incarnation, step NULLS FIRST, attempt, engine"""
"""Every engine against the lowest-numbered engine of the same sync, tensor by tensor."""

SYNCS = """
    SELECT count(*) AS n FROM (
        SELECT DISTINCT incarnation, step, attempt FROM engine_weight_checksum)"""


class EngineChecksums(Rule):
    """After each weight sync every inference engine holds the same weights.

    For each sync (the initial one has no step), every engine's tensor hashes equal
    engine 0's (the lowest-numbered engine that reported), with the same set of tensors.
    An engine that differs serves rollouts from other weights than the trainer's.

    Fails::

        step 4: engine_weight_checksum {0: {w: "aa"}, 1: {w: "ab"}}
        -> FT007: engine 1 differs from engine 0 after the sync of step 4 in [w]

    Passes::

        step 4: engine_weight_checksum {0: {w: "aa"}, 1: {w: "aa"}}
    """

    code = "FT007"
    name = "engine-checksums"
    kinds: ClassVar[dict[str, str]] = {
        "engine_mismatch": "an inference engine holds other weights than its peers after a sync",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        checked = ctx.count(SYNCS, label="FT007 syncs")
        out = []
        engines = ctx.rows(ENGINE_DIFFS, label="FT007 engines", needs=("engine_weight_checksum",))
        for r in engines:
            parts = []
            if r["differ"]:
                parts.append(
                    f"{len(r['differ'])} tensor(s) hash differently {name_list(r['differ'])}"
                )
            if r["only_mine"]:
                parts.append(
                    f"{len(r['only_mine'])} tensor(s) only on engine {r['engine']} "
                    f"{name_list(r['only_mine'])}"
                )
            if r["only_ref"]:
                parts.append(
                    f"{len(r['only_ref'])} tensor(s) missing on engine {r['engine']} "
                    f"{name_list(r['only_ref'])}"
                )
            sync = "the initial sync" if r["step"] is None else f"the sync of step {r['step']}"
            out.append(
                self.violation(
                    f"engine {r['engine']} differs from engine {r['ref_engine']} after {sync}: "
                    + "; ".join(parts)
                    + "; it generates rollouts from other weights",
                    kind="engine_mismatch",
                    location=Location(
                        r["step"], r["attempt"], r["incarnation"], segment=r["segment"]
                    ),
                )
            )
        return RuleOutcome(checked, tuple(out))
