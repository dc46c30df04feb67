"""FT004 witness-exactly-once."""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import Allocation, CommittedStep, RunContext, StepKey
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.ownership import Owners, resolve
from ftaudit.verifier.ring import keep_size, position_of
from ftaudit.verifier.rules.base import MAX_IDS, Outcome, Rule
from ftaudit.verifier.spans import Spans

SNAPSHOT_GROUPS = """
    SELECT w.incarnation, w.step, w.attempt, w.nonzero_ids, w.stale_ids,
           list(w.cell ORDER BY w.cell, w.source_rank, w.instance) AS cells,
           list(w.source_rank ORDER BY w.cell, w.source_rank, w.instance) AS ranks,
           list(w.instance ORDER BY w.cell, w.source_rank, w.instance) AS instances,
           min(w.segment) AS segment
    FROM witness_snapshot w
    JOIN (SELECT DISTINCT incarnation, step, attempt FROM committed_steps) c
      USING (incarnation, step, attempt)
    GROUP BY w.incarnation, w.step, w.attempt, w.nonzero_ids, w.stale_ids"""
"""Committed snapshots, identical contents merged: in a healthy run every cell and rank
sees the whole global batch, so a step is usually one comparison, not one per rank."""

EXCUSED = """
    WITH adv AS (
        SELECT incarnation, step, attempt, unnest(witness_ids) AS id,
               unnest(token_counts) AS tokens, unnest(all_zero) AS zero,
               coalesce(pure_advantage_loss, true) AS pure
        FROM sample_advantage_summary),
    per_id AS (
        SELECT incarnation, step, attempt, id, sum(tokens) AS tokens,
               bool_or(zero AND pure AND tokens > 0) AS zero_advantage
        FROM adv GROUP BY ALL)
    SELECT a.incarnation, a.counter_after, a.num_ids, p.id, p.tokens = 0 AS no_tokens
    FROM per_id p JOIN witness_allocated a USING (incarnation, step, attempt)
    WHERE (p.tokens = 0 OR p.zero_advantage) AND a.num_ids > 0"""
"""Witness ids whose gradient is exactly zero by the trainer's own account, joined to the
allocation of the same attempt: a sample with no loss tokens (summed over the ranks that
hold its tokens), or one with all-zero advantage under a declared pure advantage loss.
Excused only while that allocation is the id's most recent one."""

INSTANCES = """
    SELECT DISTINCT incarnation, step, cell, instance FROM witness_snapshot"""
"""Which witness instances each cell snapshotted, per incarnation and step."""

HEALS = """
    SELECT DISTINCT incarnation, step, unnest(healed_cells) AS cell FROM cell_reconfigured"""
"""When a cell was replaced by a healed process (whose layout may differ)."""

MOSTLY_EXCUSED = 0.5
"""A committed step whose excused share of samples is above this gets a warning: the
witness then checks few of its samples."""


@dataclass(frozen=True)
class _Group:
    key: StepKey
    nonzero: Spans
    stale: Spans
    members: tuple[tuple[int, int | None, str], ...]
    """(cell, rank, instance) of every snapshot with this content."""
    segment: str


class WitnessExactlyOnce(Rule):
    """Every committed sample's witness id is nonzero in every normal cell, and nothing else is.

    Per committed step, per cell whose ranks were all normal, per snapshot instance:
    ``nonzero - stale == expected``, where a slot is expected iff its most recent
    allocation in counter order (among every allocation up to this step's, any attempt
    or incarnation) is in the committed history, minus stale slots, minus excused slots:
    the trainer logged that the sample's gradient is exactly zero at that allocation (no
    loss tokens on any rank, or all-zero advantage under a declared pure advantage loss).
    An excused slot that is nonzero is still extra. A step that allocated nothing is
    checked against the most recent allocations before it. A missing id is a sample whose
    gradient never reached the weights; an extra id is abandoned work (a retried attempt,
    a rolled-back incarnation) that leaked into them, or a row that was not cleared. A
    normal cell without a snapshot, or without an instance it snapshots in other steps of
    its incarnation (since its last heal), is a violation too. A committed step whose
    samples were mostly excused gets a warning; the report counts excused samples.

    Fails (B = 10, one cell)::

        step 0 attempt 0: witness_allocated ids [0, 1, 2] samples [0, 1, 2]
        step 0 attempt 0: witness_snapshot cell 0 chunk0.head nonzero [0, 2]
        step 0: step_end accepted 0, cell 0 normal
        -> FT004: 1 sample trained in step 0 never reached cell 0: id [1] = sample [1]

    Passes::

        ... witness_snapshot cell 0 chunk0.head nonzero [0, 1, 2]
    """

    code = "FT004"
    name = "witness-exactly-once"
    kinds: ClassVar[dict[str, str]] = {
        "no_buffer_size": "witness events but no incarnation declared the buffer size",
        "no_allocation": "a committed step logged snapshots but the counter is unknown",
        "missing_snapshot": "a normal cell logged no witness snapshot for a committed step",
        "missing_instance": "a normal cell did not snapshot a witness instance it should have",
        "missing": "committed samples whose gradient never reached the weights",
        "extra": "nonzero witness rows that should be zero (leaked, revived or uncleared)",
        "mostly_excused": "most samples of a committed step were excused as leaving no trace",
    }

    def check(self, ctx: RunContext) -> Outcome:
        allocations = ctx.allocations
        B = ctx.buffer_size
        groups = self._groups(ctx)
        if not allocations and not groups:
            return Outcome(checked=0)
        if B is None:
            return Outcome(
                1,
                (
                    self.violation(
                        "witness events but no run_started buffer size", kind="no_buffer_size"
                    ),
                ),
            )
        index = _Index(ctx, allocations, B)
        layouts = _Layouts(ctx)
        by_key: dict[StepKey, list[_Group]] = defaultdict(list)
        for g in groups:
            by_key[g.key].append(g)
        violations: list[Violation] = []
        checked = 0
        excused = {"zero_advantage": 0, "no_tokens": 0}
        for step in ctx.committed:
            if step.step < ctx.since:
                continue  # incremental: judged by an earlier check
            normal = set(step.normal_cells())
            step_groups = by_key.get(step.key, [])
            violations += self._absent(step, normal, step_groups, layouts)
            tally = index.excused_of(step)
            for name, n in tally.items():
                excused[name] += n
            violations += self._mostly_excused(ctx, index, step, tally)
            if not step_groups:
                continue
            window = index.window(step)
            if window is None:
                violations.append(
                    self.violation(
                        f"step {step.step} attempt {step.attempt} of incarnation "
                        f"{step.incarnation} logged witness snapshots, but no allocation of "
                        "its incarnation precedes it: the counter is unknown, the witness "
                        "cannot be checked",
                        kind="no_allocation",
                        location=Location(step.step, step.attempt, step.incarnation),
                    )
                )
                continue
            for g in step_groups:
                members = [m for m in g.members if m[0] in normal]
                if not members:
                    continue
                checked += len(members)
                violations += self._compare(ctx, index, window, step, g, members)
        counts = {f"excused_{name}": n for name, n in excused.items()}
        return Outcome(checked, tuple(violations), counts=counts)

    # -- inputs -------------------------------------------------------------------------
    def _groups(self, ctx: RunContext) -> list[_Group]:
        out = []
        for r in ctx.rows(SNAPSHOT_GROUPS, label="FT004 snapshots"):
            out.append(
                _Group(
                    key=(r["incarnation"], r["step"], r["attempt"]),
                    nonzero=_spans(r["nonzero_ids"]),
                    stale=_spans(r["stale_ids"]),
                    members=tuple(zip(r["cells"], r["ranks"], r["instances"], strict=True)),
                    segment=r["segment"],
                )
            )
        return out

    # -- checks -------------------------------------------------------------------------
    def _absent(
        self,
        step: CommittedStep,
        normal: set[int],
        groups: list[_Group],
        layouts: _Layouts,
    ) -> list[Violation]:
        present: dict[int, set[str]] = defaultdict(set)
        for g in groups:
            for cell, _, instance in g.members:
                present[cell].add(instance)
        out = []
        for cell in sorted(normal):
            where = Location(step.step, step.attempt, step.incarnation, cell=cell)
            if not present[cell]:
                out.append(
                    self.violation(
                        f"cell {cell} was normal in step {step.step} (attempt {step.attempt}) "
                        "but logged no witness snapshot: its training cannot be verified",
                        kind="missing_snapshot",
                        location=where,
                    )
                )
                continue
            for instance in sorted(layouts.expected(step.incarnation, cell, step.step)):
                if instance not in present[cell]:
                    out.append(
                        self.violation(
                            f"cell {cell} logged no snapshot of {instance} in step {step.step} "
                            f"(attempt {step.attempt}) although it was normal and snapshots "
                            f"{instance} in other steps of incarnation {step.incarnation}",
                            kind="missing_instance",
                            location=Location(
                                step.step,
                                step.attempt,
                                step.incarnation,
                                cell=cell,
                                instance=instance,
                            ),
                        )
                    )
        return out

    def _mostly_excused(
        self, ctx: RunContext, index: _Index, step: CommittedStep, tally: dict[str, int]
    ) -> list[Violation]:
        total = index.allocated_by(step)
        n = sum(tally.values())
        if not total or n <= MOSTLY_EXCUSED * total:
            return []
        return [
            self.violation(
                f"{n} of {total} samples of step {step.step} (attempt {step.attempt}) were "
                f"excused as leaving no trace ({tally['no_tokens']} with no loss tokens, "
                f"{tally['zero_advantage']} with all-zero advantage under a pure advantage "
                "loss): the witness checks few of this step's samples; a data or masking "
                "problem can look like this",
                kind="mostly_excused",
                location=Location(step.step, step.attempt, step.incarnation),
                severity=Severity.WARNING,
            )
        ]

    def _compare(
        self,
        ctx: RunContext,
        index: _Index,
        window: _Window,
        step: CommittedStep,
        group: _Group,
        members: list[tuple[int, int | None, str]],
    ) -> list[Violation]:
        expected = window.expected_slots - group.stale
        observed = group.nonzero - group.stale
        missing = expected - observed
        extra = observed - expected
        if not missing and not extra:
            return []
        out = []
        by_place: dict[tuple[int, str], list[int | None]] = defaultdict(list)
        for cell, rank, instance in members:
            by_place[(cell, instance)].append(rank)
        for (cell, instance), ranks in sorted(by_place.items()):
            rank = ranks[0] if len(ranks) == 1 else None
            where = Location(
                step.step,
                step.attempt,
                step.incarnation,
                cell=cell,
                rank=rank,
                instance=instance,
                segment=group.segment,
            )
            place = f"cell {cell} ({instance}, {_ranks(ranks)})"
            if missing:
                out.append(self._missing(ctx, index, window, step, missing, place, where))
            if extra:
                out.append(self._extra(ctx, index, window, step, extra, group.stale, place, where))
        return out

    def _missing(
        self,
        ctx: RunContext,
        index: _Index,
        window: _Window,
        step: CommittedStep,
        missing: Spans,
        place: str,
        where: Location,
    ) -> Violation:
        ids = missing.head(MAX_IDS)
        positions = position_of(ids, window.lo, index.B)
        samples, steps = index.samples(window.owners, positions)
        n = len(missing)
        trained = f"step {_list(steps)}" if steps else "committed steps"
        seen = (
            f" (seen after step {step.step}, attempt {step.attempt})"
            if steps != [step.step]
            else f" (attempt {step.attempt})"
        )
        return self.violation(
            f"{n} sample{'s' if n != 1 else ''} trained in {trained} never reached the weights "
            f"of {place}{seen}: witness ids {missing.describe()} = samples "
            f"{ctx.describe_samples(samples, total=n)}; their gradient was lost",
            kind="missing",
            location=where,
            ids=ids.tolist(),
            sample_indices=samples.tolist(),
            id_count=n,
        )

    def _extra(
        self,
        ctx: RunContext,
        index: _Index,
        window: _Window,
        step: CommittedStep,
        extra: Spans,
        group_stale: Spans,
        place: str,
        where: Location,
    ) -> Violation:
        ids = extra.head(MAX_IDS)
        positions = position_of(ids, window.lo, index.B)
        inside = positions < window.hi
        owners = np.full(ids.shape, -1, dtype=np.int64)
        owners[inside] = window.owners.owner_of(positions[inside])
        # ids outside the active window: what held the slot last, before the window
        outside = ~inside
        earlier = positions - index.B
        before = index.owners_before(step, window.lo)
        owners[outside] = before.owner_of(earlier[outside])
        positions = np.where(inside, positions, earlier)
        reasons = []
        never = ids[owners < 0]
        if never.size:
            reasons.append(f"ids {Spans.from_ids(never).describe()} were never allocated")
        samples: list[int] = []
        leaked = False
        for owner in sorted(set(owners[owners >= 0].tolist())):
            alloc = index.allocations[owner]
            mine = owners == owner
            s = alloc.samples_at(positions[mine])
            samples += s.tolist()
            uncleared = bool(outside[mine].all())
            if uncleared:
                how = (
                    "before the active window: these rows should have been zeroed as stale; "
                    f"this snapshot declares {len(group_stale)} stale ids "
                    f"{group_stale.describe()}"
                )
                leaked = leaked or not index.committed[owner]
            elif index.committed[owner]:
                how = "excused zero-advantage or token-less samples, which should leave no trace"
            else:
                how = "abandoned work"
                leaked = True
            reasons.append(
                f"ids {Spans.from_ids(ids[mine]).describe()} = samples "
                f"{ctx.describe_samples(s)} were last allocated by "
                f"{ctx.describe_key(alloc.key)} ({how})"
            )
        n = len(extra)
        return self.violation(
            f"{n} witness id{'s' if n != 1 else ''} nonzero in {place} after step {step.step} "
            f"(attempt {step.attempt}) should be zero: "
            + "; ".join(reasons)
            + ("; work outside the committed history leaked into the weights" if leaked else ""),
            kind="extra",
            location=where,
            ids=ids.tolist(),
            sample_indices=samples,
            id_count=n,
        )


@dataclass(frozen=True)
class _Window:
    lo: int
    hi: int
    owners: Owners
    expected_slots: Spans


class _Layouts:
    """Which witness instances a cell is expected to snapshot: per incarnation and per heal.

    An incarnation may run another parallel layout (another pipeline split: other
    instances), and a healed cell is a new process. So a cell is expected to snapshot, in
    each committed step, every instance it snapshots at some step of the same
    incarnation and "generation" (since its last heal); cells not healed in the
    incarnation share one layout, so each is expected to hold the instances of them all.
    """

    def __init__(self, ctx: RunContext) -> None:
        self.heals: dict[tuple[int, int], list[int]] = defaultdict(list)
        for r in ctx.rows(HEALS, label="FT004 heals"):
            self.heals[(r["incarnation"], r["cell"])].append(r["step"])
        for steps in self.heals.values():
            steps.sort()
        self.sets: dict[tuple[int, int, int], set[str]] = defaultdict(set)
        """(incarnation, cell or -1 for the shared first generation, generation) -> instances"""
        for r in ctx.rows(INSTANCES, label="FT004 instances"):
            self.sets[self._slot(r["incarnation"], r["cell"], r["step"])].add(r["instance"])

    def _generation(self, incarnation: int, cell: int, step: int) -> int:
        return bisect_right(self.heals.get((incarnation, cell), []), step)

    def _slot(self, incarnation: int, cell: int, step: int) -> tuple[int, int, int]:
        gen = self._generation(incarnation, cell, step)
        return (incarnation, -1 if gen == 0 else cell, gen)

    def expected(self, incarnation: int, cell: int, step: int) -> set[str]:
        return self.sets.get(self._slot(incarnation, cell, step), set())


class _Index:
    """Allocations as arrays, for cutting the active window of each committed step."""

    def __init__(self, ctx: RunContext, allocations: list[Allocation], B: int) -> None:
        self.B = B
        self.keep = keep_size(B)
        self.allocations = allocations
        n = len(allocations)
        self.start = np.fromiter((a.start for a in allocations), np.int64, n)
        self.end = np.fromiter((a.counter_after for a in allocations), np.int64, n)
        self.inc = np.fromiter((a.incarnation for a in allocations), np.int64, n)
        keys = ctx.committed_keys
        self.committed = np.fromiter((a.key in keys for a in allocations), bool, n)
        self.recency = np.arange(n, dtype=np.int64)  # allocations come in (incarnation, seq)
        self.by_end = np.argsort(self.end, kind="stable")
        self.end_sorted = self.end[self.by_end]
        self.counter_of: dict[StepKey, int] = {}
        self.of_key: dict[StepKey, list[int]] = defaultdict(list)
        for a in allocations:
            self.counter_of[a.key] = max(self.counter_of.get(a.key, 0), a.counter_after)
            self.of_key[a.key].append(a.index)
        self.by_inc: dict[int, list[Allocation]] = defaultdict(list)
        for a in allocations:
            self.by_inc[a.incarnation].append(a)
        self._load_excused(ctx)

    def counter_at(self, step: CommittedStep) -> int | None:
        """The counter when ``step`` committed: its own allocation's, or for a step that
        allocated nothing, the latest allocation of its incarnation up to it (0 before any
        allocation of a fresh run; None when a resumed incarnation logged none)."""
        own = self.counter_of.get(step.key)
        if own is not None:
            return own
        before = [
            a.counter_after for a in self.by_inc.get(step.incarnation, ()) if a.step <= step.step
        ]
        if before:
            return max(before)
        return 0 if step.incarnation == 0 else None

    def allocated_by(self, step: CommittedStep) -> int:
        """How many ids the committed attempt allocated."""
        return sum(self.allocations[i].num_ids for i in self.of_key.get(step.key, ()))

    def excused_of(self, step: CommittedStep) -> dict[str, int]:
        """How many of the committed attempt's samples were excused, by reason."""
        out = {"zero_advantage": 0, "no_tokens": 0}
        for i in self.of_key.get(step.key, ()):
            a = self.allocations[i]
            zero, empty = self.exc_counts.get((a.incarnation, a.counter_after), (0, 0))
            out["zero_advantage"] += zero
            out["no_tokens"] += empty
        return out

    def owners_before(self, step: CommittedStep, lo: int) -> Owners:
        """Owners of the positions ``[lo - B, lo)``: who held each slot before the window."""
        a = np.searchsorted(self.end_sorted, lo - self.B, side="right")
        cand = self.by_end[a:]
        cand = cand[(self.inc[cand] <= step.incarnation) & (self.start[cand] < lo)]
        return resolve(cand, self.start[cand], self.end[cand], self.recency[cand], lo - self.B, lo)

    def _load_excused(self, ctx: RunContext) -> None:
        table = ctx.session.query(EXCUSED, label="FT004 excused ids")
        inc = table.column("incarnation").to_numpy(zero_copy_only=False).astype(np.int64)
        after = table.column("counter_after").to_numpy(zero_copy_only=False).astype(np.int64)
        num = table.column("num_ids").to_numpy(zero_copy_only=False).astype(np.int64)
        ids = table.column("id").to_numpy(zero_copy_only=False).astype(np.int64)
        empty = table.column("no_tokens").to_numpy(zero_copy_only=False).astype(bool)
        self.exc_counts: dict[tuple[int, int], tuple[int, int]] = {}
        for key_inc, key_after, is_empty in zip(
            inc.tolist(), after.tolist(), empty.tolist(), strict=True
        ):
            zero, none = self.exc_counts.get((key_inc, key_after), (0, 0))
            self.exc_counts[(key_inc, key_after)] = (
                (zero, none + 1) if is_empty else (zero + 1, none)
            )
        start = after - num
        pos = start + (ids - start) % self.B
        valid = (ids >= 0) & (ids < self.B) & (pos < after)
        order = np.argsort(pos[valid], kind="stable")
        self.exc_pos = pos[valid][order]
        self.exc_inc = inc[valid][order]
        self.exc_after = after[valid][order]

    def window(self, step: CommittedStep) -> _Window | None:
        hi = self.counter_at(step)
        if hi is None:
            return None
        lo = hi - min(self.keep, hi)
        a, b = np.searchsorted(self.end_sorted, [lo, hi], side="right")
        cand = self.by_end[a:b]
        cand = cand[self.inc[cand] <= step.incarnation]
        owners = resolve(cand, self.start[cand], self.end[cand], self.recency[cand], lo, hi)
        expected = owners.spans(self.committed[owners.owner])
        i, j = np.searchsorted(self.exc_pos, [lo, hi], side="left")
        if j > i:
            pos = self.exc_pos[i:j]
            own = owners.owner_of(pos)
            safe = np.maximum(own, 0)
            mine = (
                (own >= 0)
                & (self.end[safe] == self.exc_after[i:j])
                & (self.inc[safe] == self.exc_inc[i:j])
            )
            expected = expected - Spans.from_ids(pos[mine])
        return _Window(lo, hi, owners, expected.modulo(self.B))

    def samples(self, owners: Owners, positions: np.ndarray) -> tuple[np.ndarray, list[int]]:
        """Sample indices of positions, and the steps that allocated them."""
        own = owners.owner_of(positions)
        samples = np.full(positions.shape, -1, dtype=np.int64)
        steps = []
        for owner in sorted(set(own[own >= 0].tolist())):
            mine = own == owner
            samples[mine] = self.allocations[owner].samples_at(positions[mine])
            steps.append(self.allocations[owner].step)
        return samples, sorted(set(steps))


def _spans(value: dict[str, list[int]] | None) -> Spans:
    if not value or not value["starts"]:
        return Spans.empty()
    starts = np.asarray(value["starts"], dtype=np.int64)
    return Spans.of(starts, starts + np.asarray(value["lengths"], dtype=np.int64))


def _ranks(ranks: list[int | None]) -> str:
    known = sorted(r for r in ranks if r is not None)
    if len(known) == 1:
        return f"rank {known[0]}"
    return f"ranks {_list(known)}"


def _list(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
