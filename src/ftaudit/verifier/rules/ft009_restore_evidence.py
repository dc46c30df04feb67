"""FT009 restore-evidence."""

from __future__ import annotations

from typing import ClassVar

from ftaudit.eventlog.sql import literal
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Violation
from ftaudit.verifier.rules.attempt_keys import EVIDENCE_TYPES, may_be_unallocated
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.rules.rank_rows import judged_rank_rows

RESTORE_EVIDENCE = """
    SELECT incarnation, coalesce(source_role, '') AS role, source_cell AS cell,
           source_rank AS rank, step, "when" AS kind
    FROM trainer_weight_checksum WHERE "when" IN ('after_load', 'after_heal')
    UNION ALL
    SELECT incarnation, coalesce(source_role, ''), source_cell, source_rank, step,
           'adopted' FROM state_adopted"""
"""Every piece of restore evidence: a load, a heal, or live state adopted on purpose."""

UNRESTORED_RANKS = f"""
    WITH evidence AS ({RESTORE_EVIDENCE}),
    ranks AS (
        SELECT e.incarnation, coalesce(e.source_role, '') AS role, e.source_cell AS cell,
               e.source_rank AS rank, min(e.step) AS first_step, min(e.writer) AS writer,
               min(e.segment) AS segment, i.resumed_iteration, i.resumed_incarnation
        FROM events e JOIN incarnations i USING (incarnation)
        WHERE e.source_kind = 'trainer' AND i.resumed_iteration IS NOT NULL
        GROUP BY ALL)
    SELECT r.* FROM ranks r
    WHERE NOT EXISTS (SELECT 1 FROM evidence v
                      WHERE v.incarnation = r.incarnation AND v.role = r.role
                        AND v.cell = r.cell AND v.rank = r.rank)
    ORDER BY r.incarnation, r.cell, r.rank"""
"""Trainer ranks of a resumed incarnation without any restore evidence."""

UNHEALED_RANKS = f"""
    WITH evidence AS ({RESTORE_EVIDENCE}),
    heals AS (
        SELECT DISTINCT incarnation, step, heal_source, unnest(healed_cells) AS cell
        FROM cell_reconfigured WHERE len(healed_cells) > 0),
    ranks AS (
        SELECT h.incarnation, h.step, h.heal_source, h.cell,
               coalesce(e.source_role, '') AS role, e.source_rank AS rank,
               min(e.segment) AS segment
        FROM heals h JOIN events e
          ON e.incarnation = h.incarnation AND e.source_kind = 'trainer'
         AND e.source_cell = h.cell AND e.step >= h.step
        GROUP BY ALL)
    SELECT r.* FROM ranks r
    WHERE NOT EXISTS (SELECT 1 FROM evidence v
                      WHERE v.incarnation = r.incarnation AND v.role = r.role
                        AND v.cell = r.cell AND v.rank = r.rank AND v.step = r.step)
    ORDER BY r.incarnation, r.step, r.cell, r.rank"""
"""Ranks of a healed cell that trained after the heal without restore evidence at it."""

ATTEMPT_EVIDENCE = f"""
    SELECT incarnation, step, attempt, writer, seq, segment, source_cell AS cell,
           source_rank AS rank, type
    FROM events
    WHERE source_kind = 'trainer' AND step IS NOT NULL AND attempt IS NOT NULL
      AND type IN ({", ".join(map(literal, EVIDENCE_TYPES))})"""
"""Trainer events that exist only because the trainer was given ids for an attempt."""

UNALLOCATED_ATTEMPTS = f"""
    WITH evidence AS ({ATTEMPT_EVIDENCE})
    SELECT incarnation, step, attempt, min(cell) AS cell, min(rank) AS rank,
           min(segment) AS segment, count(*) AS events
    FROM evidence v
    WHERE NOT EXISTS (SELECT 1 FROM witness_allocated a
                      WHERE a.incarnation = v.incarnation AND a.step = v.step
                        AND a.attempt = v.attempt)
    GROUP BY ALL ORDER BY incarnation, step, attempt"""
"""Attempts with trainer evidence but no durable allocation."""

UNALLOCATED_IDS = """
    WITH alloc AS (
        SELECT incarnation, step, attempt, unnest(witness_ids.starts) AS lo,
               unnest(witness_ids.lengths) AS n
        FROM witness_allocated),
    received AS (
        SELECT incarnation, step, attempt, coalesce(source_role, '') AS role, cell,
               source_rank AS rank, segment, unnest(witness_ids) AS id
        FROM sample_advantage_summary),
    keyed AS (SELECT DISTINCT incarnation, step, attempt FROM witness_allocated)
    SELECT r.incarnation, r.step, r.attempt, r.role, r.cell, r.rank, min(r.segment) AS segment,
           list(DISTINCT r.id ORDER BY r.id) AS ids
    FROM received r JOIN keyed k USING (incarnation, step, attempt)
    WHERE NOT EXISTS (SELECT 1 FROM alloc a
                      WHERE a.incarnation = r.incarnation AND a.step = r.step
                        AND a.attempt = r.attempt AND r.id >= a.lo AND r.id < a.lo + a.n)
    GROUP BY ALL ORDER BY r.incarnation, r.step, r.attempt, r.cell, r.rank"""
"""Ids a trainer trained on (its per-sample receipt) that its attempt's allocation lacks."""

CHECKED = """
    SELECT (SELECT count(DISTINCT (incarnation, step, attempt)) FROM events
            WHERE source_kind = 'trainer' AND step IS NOT NULL AND attempt IS NOT NULL)
         + (SELECT count(*) FROM cell_reconfigured WHERE len(healed_cells) > 0)
         + (SELECT count(*) FROM incarnations WHERE resumed_iteration IS NOT NULL) AS n"""


class RestoreEvidence(Rule):
    """Resumed and healed ranks show what they restored; trained ids were allocated durably.

    Restore: each trainer rank of an incarnation that resumed from a checkpoint logs
    an ``after_load`` checksum (what it loaded), an ``after_heal`` checksum, or a
    ``state_adopted`` event saying why it kept its live state; each rank of a healed
    cell that trains after the heal logs an ``after_heal`` checksum (or
    ``state_adopted``) at the heal's step. A rank without any of them may be training
    on weights it never reloaded, and its rows would read as the new incarnation's work.
    Allocation: trainer evidence of an attempt (snapshots, witness gradients, sample
    summaries, applied steps) needs the driver's allocation of that attempt in the log,
    and every id a trainer reports training is among it. The driver makes an allocation
    durable before the ids reach any trainer, so a missing one was lost in a crash, and
    the resumed allocator would re-issue its ids.

    Fails::

        incarnation 1 resumed from checkpoint 3
        trainer cell 0 rank 0: witness_snapshot step 4 ...   (no after_load, no state_adopted)
        -> FT009: cell 0 rank 0 in incarnation 1 shows no restore evidence

        incarnation 0: trainer witness_snapshot step 7 attempt 0   (no witness_allocated)
        -> FT009: step 7 attempt 0 of incarnation 0 has trainer evidence but no allocation

    Passes::

        incarnation 1: trainer cell 0 rank 0 trainer_weight_checksum after_load checkpoint 3
        incarnation 1: driver witness_allocated step 4 attempt 0, then the snapshots
    """

    code = "FT009"
    name = "restore-evidence"
    kinds: ClassVar[dict[str, str]] = {
        "unrestored_rank": "a rank of a resumed incarnation logged no restore evidence",
        "unhealed_rank": "a rank of a healed cell trained on without restore evidence",
        "unallocated_attempt": "trainer evidence of an attempt whose allocation is not logged",
        "unallocated_ids": "a trainer trained ids its attempt's allocation does not hold",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        checked = ctx.count(CHECKED, label="FT009 checked")
        out = (
            self._unrestored(ctx)
            + self._unhealed(ctx)
            + self._unallocated(ctx)
            + self._unallocated_ids(ctx)
        )
        return RuleOutcome(checked, tuple(out))

    def _unrestored(self, ctx: RunContext) -> list[Violation]:
        if all(i.resumed_iteration is None for i in ctx.incarnations.values()):
            return []  # no incarnation resumed: no rank has anything to restore
        rows = judged_rank_rows(
            ctx, UNRESTORED_RANKS, label="FT009 resumed ranks", at="first_step",
            in_window=False, loaded="writer",
        )  # fmt: skip
        return [
            self.violation(
                f"{r.who} in incarnation {r.incarnation} shows no restore evidence: the "
                f"incarnation resumed from checkpoint {r['resumed_iteration']} (saved by "
                f"incarnation {r['resumed_incarnation']}) and this rank trained from step "
                f"{r.step}, but it logged neither an after_load checksum of what it loaded "
                "nor a state_adopted event; it may be training on weights it never reloaded",
                kind="unrestored_rank",
                location=r.location(),
            )
            for r in rows
        ]

    def _unhealed(self, ctx: RunContext) -> list[Violation]:
        rows = judged_rank_rows(
            ctx, UNHEALED_RANKS, label="FT009 healed ranks", needs=("cell_reconfigured",)
        )
        return [
            self.violation(
                f"{r.who} was healed from cell {r['heal_source']} at step {r.step} "
                f"(incarnation {r.incarnation}) and trained after it, but logged no restore "
                "evidence at the heal (an after_heal checksum or a state_adopted event): "
                "nothing shows it received its source's state",
                kind="unhealed_rank",
                location=r.location(),
            )
            for r in rows
        ]

    def _unallocated(self, ctx: RunContext) -> list[Violation]:
        if ctx.following and not may_be_unallocated(ctx):
            return []  # every attempt its trainer rows name that a poll reports is allocated
        rows = judged_rank_rows(
            ctx, UNALLOCATED_ATTEMPTS, label="FT009 unallocated attempts", loaded="step"
        )
        return [
            self.violation(
                f"step {r.step} attempt {r.attempt} of incarnation {r.incarnation} has "
                f"{r['events']} trainer event(s) (snapshots, sample summaries, applied steps) "
                "but no allocation in the log: the driver handed out witness ids before "
                "their allocation was durable, and a crash lost it; a resumed allocator "
                "re-issues those ids, so rows left in the weights would read as new work",
                kind="unallocated_attempt",
                location=r.location(),
            )
            for r in rows
        ]

    def _unallocated_ids(self, ctx: RunContext) -> list[Violation]:
        rows = judged_rank_rows(
            ctx,
            UNALLOCATED_IDS,
            label="FT009 unallocated ids",
            loaded="step",
            needs=("sample_advantage_summary", "witness_allocated"),
        )
        return [
            self.violation(
                f"{r.who} trained {len(r['ids'])} witness id(s) in step {r.step} attempt "
                f"{r.attempt} of incarnation {r.incarnation} that its allocation does not "
                "hold: the ids reached the trainer without a durable allocation",
                kind="unallocated_ids",
                location=r.location(),
                ids=[int(i) for i in r["ids"]],
            )
            for r in rows
        ]
