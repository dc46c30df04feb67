"""FT010 checkpoint-state."""

from __future__ import annotations

from typing import ClassVar

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Violation
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.rules.rank_rows import judged_rank_rows

CHECKSUMS = """
    CREATE OR REPLACE TEMP VIEW _ft010_checksums AS
    SELECT c.incarnation, c.step, c.attempt, c."when", coalesce(c.source_role, '') AS role,
           c.cell, c.rank, c.writer, c.seq, c.segment, c.hashes,
           coalesce(c.checkpoint.iteration,
                    CASE WHEN c."when" = 'at_save' THEN c.step
                         WHEN c."when" = 'after_load' THEN i.resumed_iteration END)
               AS ckpt_iteration,
           coalesce(c.checkpoint.incarnation,
                    CASE WHEN c."when" = 'at_save' THEN c.incarnation
                         WHEN c."when" = 'after_load' THEN i.resumed_incarnation END)
               AS ckpt_incarnation
    FROM trainer_weight_checksum c LEFT JOIN incarnations i USING (incarnation)"""

SAVE_VS_STEP = """
    WITH saves AS (SELECT * FROM _ft010_checksums WHERE "when" = 'at_save'),
    accepted AS (SELECT DISTINCT incarnation, step, accepted_attempt FROM step_end),
    steps AS (
        SELECT c.* FROM _ft010_checksums c JOIN accepted a
          ON a.incarnation = c.incarnation AND a.step = c.step
         AND a.accepted_attempt = c.attempt
        WHERE c."when" = 'after_step'
          AND EXISTS (SELECT 1 FROM saves s
                      WHERE s.ckpt_incarnation = c.incarnation AND s.ckpt_iteration = c.step)
        QUALIFY row_number() OVER (PARTITION BY c.incarnation, c.step, c.role, c.cell, c.rank
                                   ORDER BY c.seq DESC) = 1),
    pairs AS (
        SELECT s.incarnation, s.ckpt_iteration, s.role, s.cell, s.rank, s.segment,
               s.hashes AS saved, t.hashes AS stepped, t.attempt
        FROM saves s JOIN steps t
          ON t.incarnation = s.ckpt_incarnation AND t.step = s.ckpt_iteration
         AND t.role = s.role AND t.cell = s.cell AND t.rank = s.rank)
    SELECT incarnation, ckpt_iteration, role, cell, rank, segment, attempt,
           list(k ORDER BY k) FILTER (saved[k] <> stepped[k]) AS differ,
           count(*) AS compared
    FROM (SELECT *, unnest(map_keys(saved)) AS k FROM pairs)
    WHERE stepped[k] IS NOT NULL
    GROUP BY ALL ORDER BY ckpt_iteration, incarnation, cell, rank"""
"""Each save checksum against the after-step checksum of its iteration's accepted attempt
(same incarnation, role, cell and rank), over the tensors both name. Only the steps a
save names are ranked (whole partitions: the ranking is theirs as before): ranking every
after-step checksum carried 160,000 hashes maps through a window to keep 160 of them
(0.55 of FT010's 0.6 s of CPU at 10,000 steps x 16 cells)."""

LOADS_WITHOUT_SAVE = """
    SELECT l.incarnation, l.step, l.role, l.cell, l.rank, l.segment,
           l.ckpt_iteration, l.ckpt_incarnation
    FROM _ft010_checksums l
    WHERE l."when" = 'after_load' AND l.ckpt_iteration IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM _ft010_checksums s
                      WHERE s."when" = 'at_save' AND s.role = l.role AND s.rank = l.rank
                        AND s.ckpt_iteration = l.ckpt_iteration
                        AND s.ckpt_incarnation = l.ckpt_incarnation)
    ORDER BY l.incarnation, l.cell, l.rank"""
"""Loads with no save checksum of the same rank to compare with."""

SAVING_RANKS = """
    SELECT DISTINCT coalesce(source_role, '') AS role, source_rank AS rank
    FROM events WHERE source_kind = 'trainer' AND incarnation = $1"""
"""The trainer rank indices of an incarnation, in any cell: the layout that saved."""


class CheckpointState(Rule):
    """A checkpoint holds the state of its iteration; every load of it is comparable to a save.

    State of its iteration: the ``at_save`` checksum of checkpoint c by a rank equals that
    rank's ``after_step`` checksum of the accepted attempt of step c (same incarnation,
    role, cell and rank), tensor by tensor. An asynchronous save staged a step late, or a
    save taken before the optimizer step, holds another state: a resume from it replays
    or loses a step, and since the resume clears the abandoned slots of the witness, this
    comparison is where the defect stays visible. Comparable: every ``after_load``
    checksum of checkpoint c has an ``at_save`` checksum of c from the same rank index
    (any cell: when only one cell's rank 0 writes the file, every cell's rank 0 is
    compared with it, see FT006); without one the load cannot be checked at all. A rank
    index the saving incarnation did not have (a resume with more ranks per cell: FSDP
    over a larger world, DDP resumed as FSDP) has no save of its own: FT006 compares its
    cell as a whole, over whole-tensor digests.

    Fails::

        step 5 attempt 0: trainer_weight_checksum after_step cell 0 rank 0 {w: "aa"}
        (step 6 runs) trainer_weight_checksum at_save checkpoint 5 cell 0 rank 0 {w: "ab"}
        -> FT010: checkpoint 5 saved by cell 0 rank 0 is not the state after step 5: [w]

    Passes::

        step 5 attempt 0: ... after_step cell 0 rank 0 {w: "aa"}
        trainer_weight_checksum at_save checkpoint 5 cell 0 rank 0 {w: "aa"}
    """

    code = "FT010"
    name = "checkpoint-state"
    kinds: ClassVar[dict[str, str]] = {
        "checkpoint_not_its_step": "a save differs from its iteration's after-step checksum",
        "load_incomparable": "a load has no save checksum of the same rank index to compare with",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        points = ctx.checksum_points
        checked = sum(points[w].count for w in ("at_save", "after_load") if w in points)
        # a save compares only where it names an iteration under judgement; a load's
        # save may lie outside an incremental window (see _incomparable)
        saves = "at_save" in points and points["at_save"].saved
        loads = "after_load" in points and ctx.scope is None
        if not (saves or loads):
            return RuleOutcome(checked)
        ctx.session.query(CHECKSUMS, label="FT010 checksums")
        found = (self._stale_saves(ctx) if saves else []) + (
            self._incomparable(ctx) if loads else []
        )
        return RuleOutcome(checked, tuple(found))

    def _stale_saves(self, ctx: RunContext) -> list[Violation]:
        rows = judged_rank_rows(ctx, SAVE_VS_STEP, label="FT010 saves", at="ckpt_iteration")
        return [
            self.violation(
                f"checkpoint {r.step} saved by {r.who} (incarnation {r.incarnation}) is not "
                f"the state after step {r.step} (attempt {r.attempt}): {len(r['differ'])} of "
                f"{r['compared']} tensor(s) differ {_names(r['differ'])}; the save was staged "
                "at another point (a step late, or before the optimizer step), so a resume "
                "from it replays or loses a step",
                kind="checkpoint_not_its_step",
                location=r.location(),
            )
            for r in rows
            if r["differ"]
        ]

    def _incomparable(self, ctx: RunContext) -> list[Violation]:
        # incremental: the save may sit in a segment this window did not load
        rows = judged_rank_rows(
            ctx, LOADS_WITHOUT_SAVE, label="FT010 loads", in_window=False, loaded="run"
        )
        saving: dict[int, set[tuple[str, int]]] = {}
        for inc in {r["ckpt_incarnation"] for r in rows} - {None}:
            found = ctx.rows(SAVING_RANKS, [inc], label="FT010 saving ranks")
            saving[inc] = {(x["role"], x["rank"]) for x in found}
        return [
            self.violation(
                f"{r.who} in incarnation {r.incarnation} loaded checkpoint "
                f"{r['ckpt_iteration']} (saved by incarnation {r['ckpt_incarnation']}), but no "
                f"rank {r.who.rank} logged an at_save checksum of that checkpoint: what it "
                "loaded cannot be compared with what was saved (log at_save checksums on "
                "every rank index that loads)",
                kind="load_incomparable",
                location=r.location(),
            )
            for r in rows
            # a rank index that did not exist when the checkpoint was saved: another layout
            if r["ckpt_incarnation"] is None
            or (r.who.role, r.who.rank) in saving[r["ckpt_incarnation"]]
        ]


def _names(names: list[str], limit: int = 6) -> str:
    more = f", ... {len(names) - limit} more" if len(names) > limit else ""
    return "[" + ", ".join(names[:limit]) + more + "]"
