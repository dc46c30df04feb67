"""FT006 checksums."""

from __future__ import annotations

from typing import Any, ClassVar

from ftaudit.eventlog.vocabulary import SHARD_TAG, WHOLE_TAG, tensor_of
from ftaudit.verifier.checksum_digests import ChecksumDigests
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.restore_layouts import LayoutChange, RestoreLayouts
from ftaudit.verifier.rules.base import Rule, RuleOutcome, name_list

TRAINED = """
    SELECT writer, seq, step, type IN ('witness_snapshot', 'witness_gradient',
                                       'sample_advantage_summary', 'step_applied') AS trained
    FROM events WHERE step IS NOT NULL AND type <> 'trainer_weight_checksum'
    UNION ALL
    SELECT writer, seq, step, "when" = 'after_step' FROM trainer_weight_checksum
    WHERE step IS NOT NULL"""
"""Every stepped event of a writer; ``trained``: it exists only because the rank trained
that step (an after-step checksum, a snapshot, a witness gradient, a sample summary, an
applied step)."""

NEXT_AFTER_RESTORE = f"""
    SELECT r.writer, r.seq,
           arg_min(t.step, t.seq) FILTER (t.trained) AS next_trained,
           bool_or(t.step > r.step) AS moved_on
    FROM trainer_weight_checksum r JOIN ({TRAINED}) t ON t.writer = r.writer AND t.seq > r.seq
    WHERE r."when" IN ('after_heal', 'after_load') AND r.step IS NOT NULL
    GROUP BY ALL"""
"""For each heal or load at a step: the step its rank trained next (its first training
evidence after it), and whether it logged anything of a later step after it."""

BASE = f"""
    CREATE OR REPLACE TEMP TABLE _ft006_base AS
    WITH next AS ({NEXT_AFTER_RESTORE})
    SELECT c.incarnation, c.step, c.attempt, c."when", coalesce(c.source_role, '') AS role,
           c.source_role, c.cell, c.rank, c.heal_source AS source_cell, c.writer, c.seq,
           c.segment, c.hashes, coalesce(c.replica_local, []) AS replica_local,
           coalesce(c.checkpoint.iteration, i.resumed_iteration) AS ckpt_iteration,
           coalesce(c.checkpoint.incarnation, i.resumed_incarnation) AS ckpt_incarnation,
           [coalesce(c.step, -1), coalesce(c.attempt, -1),
            CASE WHEN c."when" = 'after_step' THEN 1
                 WHEN c."when" IN ('after_heal', 'after_load') AND c.step IS NOT NULL
                      AND CASE WHEN n.next_trained IS NOT NULL THEN n.next_trained <= c.step
                               ELSE NOT coalesce(n.moved_on, false) END THEN 0
                 ELSE 2 END] AS point
    FROM trainer_weight_checksum c
    LEFT JOIN incarnations i USING (incarnation)
    LEFT JOIN next n ON n.writer = c.writer AND n.seq = c.seq
    {{where}}"""
"""One row per checksum event, with its ``point`` in the rank's training: ``[step,
attempt, phase]``, ordered as the state changed. A step's phases: 0 a heal or load
before the step trained (the rank trains this step next, or never logs a step again), 1
its ``after_step``, 2 after it trained (a save, or a heal or load after which the rank
next trains a later step: a checkpoint iteration is loaded at its own step).

Which step a rank trains after a heal or load is read from its own log: its next
training evidence, or, before that is on disk, any event of a later step (a rank that
logged a later step without training this one did not train this one after the heal).
So a live window that holds the healed rank's next step in part (its snapshot sealed,
its after-step checksum not yet) places the heal as the whole log will."""

EVENTS = """
    CREATE OR REPLACE TEMP TABLE _ft006_events AS
    WITH twice AS (SELECT writer, seq FROM _ft006_base GROUP BY ALL HAVING count(*) > 1),
    firsts AS (SELECT incarnation, step, attempt, "when", source_role, rank, cell,
                      arg_min(rowid, seq) AS id
               FROM _ft006_base GROUP BY ALL),
    refs AS (SELECT incarnation, step, attempt, "when", source_role, rank, min(cell) AS ref_cell
             FROM firsts GROUP BY ALL)
    SELECT b.incarnation, b.step, b.attempt, b."when", b.role, b.cell, b.rank, b.source_cell,
           b.writer, b.seq, b.segment, b.hashes, b.replica_local, t.seq IS NULL AS alone,
           b.ckpt_iteration, b.ckpt_incarnation, r.ref_cell, f.id IS NOT NULL AS first, b.point
    FROM _ft006_base b
    JOIN refs r ON r.incarnation = b.incarnation AND r.step IS NOT DISTINCT FROM b.step
     AND r.attempt IS NOT DISTINCT FROM b.attempt AND r."when" = b."when"
     AND r.source_role IS NOT DISTINCT FROM b.source_role AND r.rank IS NOT DISTINCT FROM b.rank
    LEFT JOIN twice t ON t.writer = b.writer AND t.seq = b.seq
    LEFT JOIN firsts f ON f.id = b.rowid"""
""":data:`BASE` with ``ref_cell``, the cell every other cell is compared against (the
lowest at the same point and rank); ``first``: the cell's first checksum there (lowest
sequence number), the one compared against; and ``alone``: no other event has its writer
and sequence number. Each is an aggregate over the narrow columns joined back: as
windows (a sort each) the three cost 0.44 s of CPU at 10,000 steps x 16 cells, as
hashed aggregates 0.21 s; computed over the rows with their ``hashes``, each window
carried the maps along (0.9 of 1.3 s).

A table, computed once (as a view, each comparison below planned it twice again, a third
of a small run's FT006), one row per checksum event; with its ``hashes`` (a map each: the
table's main size, 60-90 MB more peak RSS at 10,000 steps x 16 cells), so that a pair with
identical hashes is told apart without unnesting them."""


TENSORS = f"""
    SELECT t.writer, t.seq, t.tensor, t.hash,
           list_contains(t.replica_local,
                         split_part(split_part(t.tensor, '{SHARD_TAG}[', 1), '{WHOLE_TAG}', 1))
               AS replica_local
    FROM (SELECT p.writer, p.seq, e.replica_local,
                 unnest(map_keys(e.hashes)) AS tensor, unnest(map_values(e.hashes)) AS hash
          FROM pairs p JOIN _ft006_events e ON e.writer = p.{{writer}} AND e.seq = p.{{seq}}) t"""
"""One row per tensor hash of each checksum of ``pairs`` (``{writer}``, ``{seq}``: its own
or its reference); ``replica_local``: the checksum declared the tensor differs between
cells by design (declared by its name: its shards and whole digest go with it, as
:func:`~ftaudit.eventlog.events.tensor_of` reads a name). Unnested for the pairs only, not
for every checksum of the run."""


CROSS_REPLICA_PAIRS = """
    SELECT * EXCLUDE (hashes, alone, same) FROM (
        SELECT e.*, r.writer AS ref_writer, r.seq AS ref_seq,
               e.alone AND r.alone AND e.hashes IS NOT DISTINCT FROM r.hashes AS same
        FROM _ft006_events e JOIN _ft006_events r
          ON r.incarnation = e.incarnation AND r.step IS NOT DISTINCT FROM e.step
         AND r.attempt IS NOT DISTINCT FROM e.attempt AND r."when" = e."when"
         AND r.role = e.role AND r.rank = e.rank AND r.cell = e.ref_cell AND r.first
        WHERE e."when" <> 'after_heal' AND e.cell <> e.ref_cell)
    QUALIFY NOT bool_and(same) OVER (PARTITION BY writer, seq)"""
"""Each checksum against the same rank of the lowest cell at the same point; left out
where each of its pairs holds the very same hashes (in the same order) as its reference,
both being the one event of their writer and sequence number: no tensor can then differ,
and most checksums of a healthy run are such (comparing them tensor by tensor was most
of FT006's time)."""


RESTORE_PAIRS = """
    SELECT e.*, s.writer AS ref_writer, s.seq AS ref_seq
    FROM _ft006_events e JOIN _ft006_events s
      ON s."when" = 'at_save' AND s.rank = e.rank AND s.role = e.role
     AND coalesce(s.ckpt_iteration, s.step) = e.ckpt_iteration
     AND s.incarnation = e.ckpt_incarnation
    WHERE e."when" = 'after_load' AND e.ckpt_iteration IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY e.writer, e.seq
                               ORDER BY (s.cell = e.cell) DESC, s.cell, s.seq DESC) = 1"""
"""Each load against the save of the same checkpoint by the same rank (same cell first)."""

HEAL_PAIRS = """
    SELECT e.*, s.writer AS ref_writer, s.seq AS ref_seq
    FROM _ft006_events e JOIN _ft006_events s
      ON s.incarnation = e.incarnation AND s.cell = e.source_cell AND s.rank = e.rank
     AND s.role = e.role AND s.point <= e.point
    WHERE e."when" = 'after_heal' AND e.source_cell IS NOT NULL AND e.source_cell <> e.cell
    QUALIFY row_number() OVER (PARTITION BY e.writer, e.seq
                               ORDER BY s.point DESC, s.seq DESC) = 1"""
"""Each healed rank against what its source rank held when it sent: the source's last
checksum at or before the heal's point (its own at-heal checksum where it logs one, the
latest in its log; else its state after the step, a heal it received, ... whichever came
last before the heal)."""

COMPARE = """
    WITH pairs AS ({pairs}),
    m AS ({mine}),
    r AS ({ref}),
    d AS (SELECT coalesce(m.writer, r.writer) AS writer, coalesce(m.seq, r.seq) AS seq,
                 coalesce(m.tensor, r.tensor) AS tensor, m.hash AS mh, r.hash AS rh
          FROM m FULL JOIN r ON m.writer = r.writer AND m.seq = r.seq AND m.tensor = r.tensor
          WHERE {keep})
    SELECT p.incarnation, p.step, p.attempt, p."when", p.role, p.cell, p.rank, p.ref_cell,
           p.source_cell, p.ckpt_iteration, p.ckpt_incarnation, p.segment,
           list(d.tensor ORDER BY d.tensor) FILTER (d.mh <> d.rh) AS differ,
           list(d.tensor ORDER BY d.tensor) FILTER (d.rh IS NULL AND NOT contains(d.tensor, $1)
                                                    AND NOT ends_with(d.tensor, $2))
               AS only_mine,
           list(d.tensor ORDER BY d.tensor) FILTER (d.mh IS NULL AND NOT contains(d.tensor, $1)
                                                    AND NOT ends_with(d.tensor, $2))
               AS only_ref
    FROM d JOIN pairs p USING (writer, seq)
    GROUP BY ALL
    HAVING count(*) FILTER (d.mh IS DISTINCT FROM d.rh) > 0
    ORDER BY p.incarnation, p.step, p.attempt, p.cell, p.rank"""
"""Tensor by tensor, each checksum of ``pairs`` against its reference checksum. A local
shard's hash (``$1`` = the shard tag) present on one side only is another layout (a
resharded restore); a whole-tensor digest (``$2`` = its tag) on one side only was taken
at a save, load or heal and the other side is an after-step checksum: neither is a
missing tensor."""

SHARD_PARAMS = [SHARD_TAG + "[", WHOLE_TAG]
"""The parameters of :data:`COMPARE`."""

POINTS = """
    SELECT count(*) AS points,
           coalesce(bool_and(alike) FILTER ("when" <> 'after_heal'), true) AS alike
    FROM (SELECT "when", count(DISTINCT hashes) = 1 AND count(hashes) = count(*) AS alike
          FROM trainer_weight_checksum
          GROUP BY incarnation, step, attempt, "when", coalesce(source_role, ''), rank)"""
"""How many points (incarnation, step, attempt, when, role, rank) the checksums are at, and
whether every point compared across cells (not a heal's: :data:`CROSS_REPLICA_PAIRS`
pairs by role, ``coalesce``-d) holds the very same hashes in all its checksums, none NULL.
Then no pair can differ, and a full verification skips the cross-replica comparison: at
10,000 steps x 16 cells this exact test (``DISTINCT`` compares the maps themselves, not
a digest) took 0.09 s of CPU, the comparison 0.36-0.39 s. A follower asks its
:class:`ChecksumDigests` instead, which costs no query."""

SAVES_AND_LOADS = """WHERE c."when" IN ('at_save', 'after_load')"""
"""The checksums a restore's comparison reads (:data:`RESTORE_PAIRS`): where replicas need
no comparison and no rank was healed, the others need no :data:`EVENTS` row (at 10,000
steps x 16 cells, making the table of every checksum cost 0.44-0.50 s of CPU)."""


class Checksums(Rule):
    """Replicas hold bitwise-equal state, and restores load exactly what was saved.

    Cross-replica: for each step, attempt and checksum point, the same rank in every
    cell holds the same hash for every tensor (parameters, buffers, optimizer state);
    ranks within a cell are never compared. Restore: what each rank loaded when an
    incarnation resumed from checkpoint c hashes equal to what was recorded when c was
    saved, and a healed cell holds what its source cell held when it sent: the source's
    last checksum before the heal, in the order the state changed (a heal at step s falls
    before the step's ``after_step`` when the healed rank trains step s next, after it
    when the rank next trains a later step). Tensors a checksum declares
    replica-local (state that differs per cell by design, e.g. batch-norm statistics of
    each cell's own data) are left out of the cross-replica comparison only. A cell that
    loads a checkpoint over another parallel layout than saved it (another world size,
    FSDP saved and DDP resumed, another pipeline split: rank ``r`` now holds other
    tensors or other rows) is compared as a whole (:mod:`ftaudit.verifier.restore_layouts`):
    each tensor's layout-independent hashes across its ranks. A local shard's hash (a
    name tagged ``@rows[a:b]``, FSDP2) is compared only with the same shard; after a
    resharding the whole-tensor digests (``@whole``) compare. A rank the save did not
    have (the world grew) restores an untagged name only from copies every saved rank
    held identically: where the saved ranks' copies differ, the state is one rank's
    (an RNG, a loader position) and no copy is the new rank's.

    Fails::

        step 3: trainer_weight_checksum after_step cell 0 rank 0 {w: "aa", exp_avg: "11"}
        step 3: trainer_weight_checksum after_step cell 1 rank 0 {w: "ab", exp_avg: "11"}
        -> FT006: rank 0 of cell 1 differs from cell 0 after step 3 in [w]

        checkpoint 1 at_save rank 0 {rng: "r0"}, rank 1 {rng: "r1"}
        incarnation 1 after_load rank 0 {rng: "r0"}, rank 1 {rng: "r1"}, rank 2 {rng: "r0"}
        -> FT006: rank 2 of cell 0 loaded checkpoint 1 without a saved copy of its own of
           [rng]: ranks 0, 1 saved different copies

    Passes::

        step 3: ... cell 1 rank 0 {w: "aa", exp_avg: "11"}
        (rank 1 of cell 0 may hold other hashes: it is a different shard)
        incarnation 1 after_load rank 2 {sched: "s"}   (ranks 0 and 1 saved sched "s")
    """

    code = "FT006"
    name = "checksums"
    kinds: ClassVar[dict[str, str]] = {
        "replica_mismatch": "the same rank of two cells holds different state at one point",
        "restore_mismatch": "a rank loaded other state than its checkpoint recorded at save",
        "heal_mismatch": "a healed rank does not hold what its source rank held",
        "foreign_copy": "a rank that saved no copy of per-rank state restored another rank's",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        # a load or heal compares with what was saved or sent before it: none at a step
        # under judgement (the common poll of a follower), nothing to report
        restores = ctx.checksums_judged("after_load")
        heals = ctx.checksums_judged("after_heal")
        if ctx.following:
            digests = ctx.kept(ChecksumDigests)
            checked = digests.points
            cross = not digests.all_alike(ctx.since)
        else:
            found = ctx.rows(POINTS, label="FT006 points")[0]
            checked, cross = found["points"], not found["alike"]
        if not (cross or restores or heals):
            return RuleOutcome(checked)
        _create_events(ctx, "" if cross or heals else SAVES_AND_LOADS)
        out = self._cross_replica(ctx) if cross else []
        if restores:
            out += self._restores(ctx)
        if heals:
            out += self._heals(ctx)
        return RuleOutcome(checked, tuple(out))

    def _cross_replica(self, ctx: RunContext) -> list[Violation]:
        rows = ctx.rows(
            _compare(CROSS_REPLICA_PAIRS, replica_local=False),
            SHARD_PARAMS,
            label="FT006 cross-replica",
        )
        out = []
        for r in rows:
            detail = _diff_text(
                r["differ"],
                r["only_mine"],
                r["only_ref"],
                "this cell",
                "cell " + str(r["ref_cell"]),
            )
            if not detail:
                continue
            role = f" {r['role']}" if r["role"] else ""
            at = f"step {r['step']} attempt {r['attempt']}" if r["step"] is not None else "start"
            out.append(
                self.violation(
                    f"rank {r['rank']} of{role} cell {r['cell']} does not match rank {r['rank']} "
                    f"of cell {r['ref_cell']} at {at} ({r['when']}): {detail}; the replicas "
                    "diverged",
                    kind="replica_mismatch",
                    location=_where(r),
                )
            )
        return out

    def _restores(self, ctx: RunContext) -> list[Violation]:
        layouts = RestoreLayouts(ctx)
        rows = ctx.rows(_compare(RESTORE_PAIRS), SHARD_PARAMS, label="FT006 restores")
        out = []
        for r in rows:
            if (r["incarnation"], r["cell"], r["role"]) in layouts.changed:
                continue  # another parallel layout: compared per cell below
            detail = _diff_text(r["differ"], r["only_mine"], r["only_ref"], "loaded", "saved")
            if not detail:
                continue
            out.append(
                self.violation(
                    f"rank {r['rank']} of cell {r['cell']} in incarnation {r['incarnation']} "
                    f"loaded checkpoint {r['ckpt_iteration']} (saved by incarnation "
                    f"{r['ckpt_incarnation']}) but its state differs from what was saved: "
                    f"{detail}",
                    kind="restore_mismatch",
                    location=_where(r),
                )
            )
        for change in layouts.changed.values():
            out += self._foreign_copies(change)
            differ, only_loaded, only_saved, uncompared = change.diff()
            detail = _diff_text(differ, only_loaded, only_saved, "loaded", "saved")
            if uncompared:
                detail += "; " if detail else ""
                detail += (
                    f"{len(uncompared)} tensor(s) have no hash that both layouts log "
                    f"{name_list(uncompared)} (log checksums with whole-tensor digests)"
                )
            if not detail:
                continue
            out.append(
                self.violation(
                    f"cell {change.cell} in incarnation {change.incarnation} loaded checkpoint "
                    f"{change.iteration} (saved by incarnation {change.saved_by}) with another "
                    f"parallel layout ({change.ranks_loaded} rank(s), saved by "
                    f"{change.ranks_saved}); compared tensor by tensor across the cell's "
                    f"ranks, its state differs from what was saved: {detail}",
                    kind="restore_mismatch",
                    location=Location(
                        change.step, incarnation=change.incarnation, cell=change.cell
                    ),
                )
            )
        return out

    def _foreign_copies(self, change: LayoutChange) -> list[Violation]:
        out = []
        for copy in change.foreign_copies():
            took = "; ".join(
                f"it holds rank {r}'s copy of {n}" if r is not None else f"{n} matches no copy"
                for n, r in zip(copy.names, copy.taken_from, strict=True)
            )
            saved_by = ", ".join(map(str, copy.saved_by))
            out.append(
                self.violation(
                    f"rank {copy.rank} of cell {change.cell} in incarnation "
                    f"{change.incarnation} loaded checkpoint {change.iteration} (saved by "
                    f"incarnation {change.saved_by}) without a saved copy of its own of "
                    f"{name_list(list(copy.names))}: ranks {saved_by} saved different copies "
                    f"(state of one rank), so none is rank {copy.rank}'s ({took}); resume on "
                    "the saved ranks, or restore this state another way",
                    kind="foreign_copy",
                    location=Location(
                        change.step,
                        incarnation=change.incarnation,
                        cell=change.cell,
                        rank=copy.rank,
                    ),
                )
            )
        return out

    def _heals(self, ctx: RunContext) -> list[Violation]:
        rows = ctx.rows(_compare(HEAL_PAIRS), SHARD_PARAMS, label="FT006 heals")
        out = []
        for r in rows:
            detail = _diff_text(
                r["differ"], r["only_mine"], r["only_ref"], "healed cell", "source cell"
            )
            if not detail:
                continue
            out.append(
                self.violation(
                    f"cell {r['cell']} rank {r['rank']} was healed from cell {r['source_cell']} "
                    f"at step {r['step']} but does not hold what the source held: {detail}",
                    kind="heal_mismatch",
                    location=_where(r),
                )
            )
        return out


def _compare(pairs: str, *, replica_local: bool = True) -> str:
    """The comparison query over one of the constant ``*_PAIRS`` selections; without
    ``replica_local``, tensors either side declares replica-local are left out."""
    keep = (
        "true"
        if replica_local
        else "NOT (coalesce(m.replica_local, false) OR coalesce(r.replica_local, false))"
    )
    mine = TENSORS.replace("{writer}", "writer").replace("{seq}", "seq")
    ref = TENSORS.replace("{writer}", "ref_writer").replace("{seq}", "ref_seq")
    return (
        COMPARE.replace("{pairs}", pairs)
        .replace("{keep}", keep)
        .replace("{mine}", mine)
        .replace("{ref}", ref)
    )


def _diff_text(
    differ: list[str] | None,
    only_mine: list[str] | None,
    only_ref: list[str] | None,
    mine: str,
    ref: str,
) -> str:
    parts = []
    differ = _one_name_per_tensor(differ or [])
    if differ:
        parts.append(f"{len(differ)} tensor(s) hash differently {name_list(differ)}")
    if only_mine:
        parts.append(f"{len(only_mine)} tensor(s) only in {mine} {name_list(only_mine)}")
    if only_ref:
        parts.append(f"{len(only_ref)} tensor(s) only in {ref} {name_list(only_ref)}")
    return "; ".join(parts)


def _one_name_per_tensor(differ: list[str]) -> list[str]:
    """``differ`` without the whole-tensor digests of tensors whose bitwise or shard hash
    is listed too: one tensor, one entry (the digest then adds nothing to the report)."""
    listed = {tensor_of(n) for n in differ if not n.endswith(WHOLE_TAG)}
    return [n for n in differ if not (n.endswith(WHOLE_TAG) and tensor_of(n) in listed)]


def _where(r: dict[str, Any]) -> Location:
    """Where a compared checksum row was logged."""
    return Location(
        r["step"],
        r["attempt"],
        r["incarnation"],
        cell=r["cell"],
        rank=r["rank"],
        segment=r["segment"],
    )


def _create_events(ctx: RunContext, where: str = "") -> None:
    """Create :data:`EVENTS` (through :data:`BASE`, dropped once it is read), of the
    checksums meeting ``where`` (a ``WHERE`` clause on ``c``; empty: of all)."""
    ctx.session.query(BASE.format(where=where), label="FT006 events")
    ctx.session.query(EVENTS, label="FT006 events: references")
    ctx.session.query("DROP TABLE _ft006_base", label="FT006 events: drop")
