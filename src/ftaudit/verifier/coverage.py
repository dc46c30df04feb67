"""The witness coverage model: which ring slots a committed step's snapshots must hold.

A committed step's witness snapshot is compared with the ring's *active window*: the last
``keep`` counter positions before the step's allocation ended (for a step that allocated
nothing, the latest allocation of its incarnation up to it). A slot there is expected
nonzero iff its most recent allocation in counter order (among every allocation up to
this step's, any attempt or incarnation) is in the committed history, minus the stale
slots the snapshot names, minus excused slots (the trainer logged that the sample's
gradient is exactly zero). Which instances a cell must snapshot follows its incarnation
and its heals (:class:`InstanceLayouts`).

FT004 judges with this model and the report draws it
(:func:`~ftaudit.verifier.coverage_bulk.step_coverage`), so the picture shows exactly what
the rule compared.
"""

from __future__ import annotations

import itertools
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ftaudit.eventlog.arrays import int64_numpy, list_lengths, null_mask
from ftaudit.verifier.context import Allocation, CommittedStep, RunContext, StepKey
from ftaudit.verifier.ownership import Owners, resolve
from ftaudit.verifier.ring import keep_size
from ftaudit.verifier.snapshot_instances import SnapshotInstances
from ftaudit.verifier.spans import Spans, spans_of_rows

SNAPSHOT_GROUPS = """
    SELECT incarnation, step, attempt, nonzero_ids, stale_ids,
           list_transform(members, lambda m: m.cell) AS cells,
           list_transform(members, lambda m: m.rank) AS ranks,
           list_transform(members, lambda m: m.instance) AS instances,
           segment
    FROM (
        SELECT w.incarnation, w.step, w.attempt, w.nonzero_ids, w.stale_ids,
               list_sort(list({'cell': w.cell, 'rank': w.source_rank, 'instance': w.instance}))
                   AS members,
               min(w.segment) AS segment
        FROM witness_snapshot w
        JOIN (SELECT DISTINCT incarnation, step, attempt FROM committed_steps WHERE step >= ?) c
          USING (incarnation, step, attempt)
        GROUP BY w.incarnation, w.step, w.attempt, w.nonzero_ids, w.stale_ids)"""
"""Committed snapshots from a step on (the first under judgement), identical contents
merged: in a healthy run every cell and rank sees the whole global batch, so a step is
usually one comparison, not one per rank. Each group's members (cell, rank, instance) in
order, NULLs last: one sort of the members as structs (which DuckDB orders field by
field, NULL fields last, as ``ORDER BY cell, rank, instance``), where three ordered
``list`` aggregates cost three (0.45 against 0.25 s of CPU at 10,000 steps x 16 cells)."""

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

EXCUSED_NEEDS = ("sample_advantage_summary", "witness_allocated")
"""The event types every row of :data:`EXCUSED` is made from."""

HEALS = """
    SELECT DISTINCT incarnation, step, unnest(healed_cells) AS cell FROM cell_reconfigured"""
"""When a cell was replaced by a healed process (whose layout may differ)."""

INSTANCES = f"""
    WITH heals AS ({HEALS}),
    seen AS (SELECT DISTINCT incarnation, step, cell, instance FROM witness_snapshot)
    SELECT DISTINCT incarnation, cell, instance, generation FROM (
        SELECT s.incarnation, s.cell, s.instance, count(h.step) AS generation
        FROM seen s LEFT JOIN heals h
          ON h.incarnation = s.incarnation AND h.cell = s.cell AND h.step <= s.step
        GROUP BY s.incarnation, s.step, s.cell, s.instance)"""
"""Which witness instances each cell snapshotted, per incarnation and generation of the
cell (how many heals of it came at or before the step): one row per instance and
generation, not per step (352,000 rows at 10,000 steps x 16 cells, a fifth of FT004)."""


Member = tuple[int, int | None, str]
"""(cell, rank, instance) of one witness snapshot."""


@dataclass(frozen=True)
class SnapshotGroup:
    """Committed snapshots of one attempt with identical contents."""

    key: StepKey
    nonzero: Spans
    stale: Spans
    members: tuple[Member, ...]
    """(cell, rank, instance) of every snapshot with this content."""
    segment: str

    def members_in(self, cells: set[int]) -> list[Member]:
        """The snapshots taken by ``cells`` (the normal cells of the step)."""
        return [m for m in self.members if m[0] in cells]


def snapshot_groups(ctx: RunContext) -> dict[StepKey, list[SnapshotGroup]]:
    """The snapshot groups of every committed attempt under judgement (at ``ctx.since``
    or later: an online window's earlier steps were judged by an earlier poll), by attempt.

    Read as Arrow columns, not as rows of nested Python values: DuckDB's values of the
    groups' id sets and members cost more than the query (0.3 s of CPU at 10,000 steps x
    16 cells, against 0.28 s for the query itself)."""
    out: dict[StepKey, list[SnapshotGroup]] = defaultdict(list)
    table = ctx.session.query(SNAPSHOT_GROUPS, [ctx.since], label="witness snapshots")
    if not table.num_rows:
        return out
    column = {name: table.column(name).combine_chunks() for name in table.column_names}
    keys = zip(
        *(int64_numpy(column[c]).tolist() for c in ("incarnation", "step", "attempt")),
        strict=True,
    )
    for key, nonzero, stale, members, segment in zip(
        keys,
        spans_of_rows(column["nonzero_ids"]),
        spans_of_rows(column["stale_ids"]),
        _members_of_rows(column["cells"], column["ranks"], column["instances"]),
        column["segment"].to_pylist(),
        strict=True,
    ):
        out[key].append(SnapshotGroup(key, nonzero, stale, members, segment))
    return out


def _members_of_rows(
    cells: pa.ListArray, ranks: pa.ListArray, instances: pa.ListArray
) -> list[tuple[Member, ...]]:
    """Each group's members, one tuple per distinct list: a run's steps are mostly
    snapshotted by the same cells, ranks and instances, so each list is made into Python
    values once (160,000 members at 10,000 steps x 16 cells: one distinct list)."""
    if (
        cells.null_count
        or ranks.null_count
        or instances.null_count
        or instances.type.value_type != pa.string()
    ):
        lists = (cells.to_pylist(), ranks.to_pylist(), instances.to_pylist())
        return [tuple(zip(c, r, i, strict=True)) for c, r, i in zip(*lists, strict=True)]
    offsets = np.cumsum(np.concatenate(([0], list_lengths(cells))))
    flat = [
        column.values.slice(column.offsets[0].as_py(), int(offsets[-1]))
        for column in (cells, ranks, instances)
    ]
    # a list's key: its cells, ranks and instances' lengths as integers (and which are
    # NULL), then the instances' text; read from the buffers, since pyarrow's
    # dictionary_encode would import pyarrow.compute (0.1 s of start-up)
    names = flat[2]
    text_at = np.frombuffer(
        names.buffers()[1], np.int32, count=len(names) + 1, offset=names.offset * 4
    )
    data = names.buffers()[2]
    text = data.to_pybytes() if data is not None else b""
    columns = [int64_numpy(flat[0], null=-1), int64_numpy(flat[1], null=-1), np.diff(text_at)]
    columns += [null_mask(f).astype(np.int64) for f in flat]
    codes = np.stack(columns, axis=1)
    seen: dict[tuple[bytes, bytes], tuple[Member, ...]] = {}
    out = []
    text_bounds = text_at.tolist()
    for a, b in itertools.pairwise(offsets.tolist()):
        key = (codes[a:b].tobytes(), text[text_bounds[a] : text_bounds[b]])
        members = seen.get(key)
        if members is None:
            members = seen[key] = tuple(
                zip(*(f.slice(a, b - a).to_pylist() for f in flat), strict=True)
            )
        out.append(members)
    return out


@dataclass(frozen=True)
class ActiveWindow:
    """The counter positions ``[lo, hi)`` a committed step's snapshot is compared with."""

    lo: int
    hi: int
    owners: Owners
    """The most recent allocation owning each position."""
    expected_slots: Spans
    """Ring slots expected nonzero (before the snapshot's own stale slots are removed)."""
    expected_positions: Spans
    """The counter positions behind ``expected_slots``."""
    ring: int

    def expected_since(self, counter: int) -> Spans:
        """The expected slots whose allocation came at or after ``counter``: all a witness
        instance that first existed then can hold."""
        return self.expected_positions.clip(counter, self.hi).modulo(self.ring)


_NONE: frozenset[str] = frozenset()


class InstanceLayouts:
    """Which witness instances a cell is expected to snapshot: per incarnation and per heal.

    An incarnation may run another parallel layout (another pipeline split: other
    instances), and a healed cell is a new process. So a cell is expected to snapshot, in
    each committed step, every instance it snapshots at some step of the same
    incarnation and "generation" (since its last heal); cells not healed in the
    incarnation share one layout, so each is expected to hold the instances of them all.
    """

    def __init__(self, ctx: RunContext) -> None:
        self.heals: dict[tuple[int, int], list[int]] = defaultdict(list)
        for r in ctx.rows(HEALS, label="witness heals", needs=("cell_reconfigured",)):
            self.heals[(r["incarnation"], r["cell"])].append(r["step"])
        for steps in self.heals.values():
            steps.sort()
        self._healed = {incarnation for incarnation, _ in self.heals}
        self.sets: dict[tuple[int, int, int], set[str]] = defaultdict(set)
        """(incarnation, cell or -1 for the shared first generation, generation) -> instances"""
        for incarnation, cell, instance, gen in _instances(ctx, self.heals):
            self.sets[(incarnation, -1 if gen == 0 else cell, gen)].add(instance)

    def _slot(self, incarnation: int, cell: int, step: int) -> tuple[int, int, int]:
        heals = self.heals.get((incarnation, cell))
        gen = bisect_right(heals, step) if heals else 0
        return (incarnation, -1 if gen == 0 else cell, gen)

    def expected(self, incarnation: int, cell: int, step: int) -> AbstractSet[str]:
        if (incarnation, cell) not in self.heals:  # never healed (most cells): one lookup
            return self.sets.get((incarnation, -1, 0), _NONE)
        return self.sets.get(self._slot(incarnation, cell, step), _NONE)

    def healed(self, incarnation: int) -> bool:
        """Whether a cell was healed in the incarnation (its layout may change at a step)."""
        return incarnation in self._healed

    def of_incarnation(self, incarnation: int) -> set[str]:
        """Every instance snapshotted in the incarnation, by any cell."""
        out: set[str] = set()
        for (inc, _, _), instances in self.sets.items():
            if inc == incarnation:
                out |= instances
        return out


def _instances(
    ctx: RunContext, heals: Mapping[tuple[int, int], list[int]]
) -> Iterable[tuple[int | None, int | None, str | None, int]]:
    """(incarnation, cell, instance, generation) of :data:`INSTANCES`: asked of the loaded
    run, or kept by a follower between its polls (``heals``: each cell's, sorted)."""
    if ctx.following:
        return ctx.kept(SnapshotInstances).generations(heals)
    rows = ctx.rows(INSTANCES, label="witness instances")
    return ((r["incarnation"], r["cell"], r["instance"], r["generation"]) for r in rows)


class CoverageModel:
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

    def births(self, ctx: RunContext, layouts: InstanceLayouts) -> dict[tuple[int, str], int]:
        """(incarnation, instance) -> counter, for instances a resumed incarnation has and
        the incarnation it resumed from did not (another parallel layout): they start
        from zero rows and can only hold samples allocated since the incarnation began."""
        out = {}
        for inc in ctx.incarnations.values():
            before = inc.resumed_incarnation
            mine = self.by_inc.get(inc.incarnation)
            if before is None or not mine:
                continue
            for instance in layouts.of_incarnation(inc.incarnation) - layouts.of_incarnation(
                before
            ):
                out[(inc.incarnation, instance)] = mine[0].start
        return out

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
        self.exc_counts: dict[tuple[int, int], tuple[int, int]] = {}
        if not all(ctx.session.holds(t) for t in EXCUSED_NEEDS):
            # nothing can be excused: the query (planned in milliseconds) is not asked
            self.exc_pos, self.exc_inc, self.exc_after = (np.empty(0, dtype=np.int64),) * 3
            return
        table = ctx.session.query(EXCUSED, label="excused witness ids")
        inc = int64_numpy(table.column("incarnation"))
        after = int64_numpy(table.column("counter_after"))
        num = int64_numpy(table.column("num_ids"))
        ids = int64_numpy(table.column("id"))
        empty = int64_numpy(table.column("no_tokens"), null=0).astype(bool)
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

    def active_window(self, step: CommittedStep) -> ActiveWindow | None:
        """The step's active window; None when its counter is unknown."""
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
        return ActiveWindow(lo, hi, owners, expected.modulo(self.B), expected, self.B)

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


@dataclass(frozen=True)
class StepCoverage:
    """Witness coverage of one committed step: expected slots against seen, summed over the
    snapshots of the normal cells (each cell and instance is one comparison)."""

    step: int
    attempt: int
    incarnation: int
    snapshots: int
    expected: int
    seen: int
    missing: int
    extra: int

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.extra == 0
