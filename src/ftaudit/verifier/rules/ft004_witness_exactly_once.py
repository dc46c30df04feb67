"""FT004 witness-exactly-once."""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import CommittedStep, RunContext
from ftaudit.verifier.coverage import (
    ActiveWindow,
    CoverageModel,
    InstanceLayouts,
    SnapshotGroup,
    snapshot_groups,
)
from ftaudit.verifier.coverage_bulk import matching_steps
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.ring import position_of
from ftaudit.verifier.rules.base import MAX_IDS, Rule, RuleOutcome
from ftaudit.verifier.spans import Spans

MOSTLY_EXCUSED = 0.5
"""A committed step whose excused share of samples is above this gets a warning: the
witness then checks few of its samples."""


class WitnessExactlyOnce(Rule):
    """Every committed sample's witness id is nonzero in every normal cell, and nothing else is.

    The expectation is the coverage model of :mod:`ftaudit.verifier.coverage`.
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
    its incarnation (since its last heal), is a violation too. An instance that a resumed
    incarnation has and the one it resumed from had not (another parallel layout) starts
    from zero rows: it is expected to hold only samples allocated since then. A committed step whose
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

    def check(self, ctx: RunContext) -> RuleOutcome:
        allocations = ctx.allocations
        B = ctx.buffer_size
        by_key = snapshot_groups(ctx)
        if not allocations and not by_key:
            return RuleOutcome(checked=0)
        if B is None:
            return RuleOutcome(
                1,
                (
                    self.violation(
                        "witness events but no run_started buffer size", kind="no_buffer_size"
                    ),
                ),
            )
        index = CoverageModel(ctx, allocations, B)
        layouts = InstanceLayouts(ctx)
        births = index.births(ctx, layouts)
        # incremental: earlier steps were judged by an earlier check
        judged = [step for step in ctx.committed if step.step >= ctx.since]
        cleared = matching_steps(index, judged, by_key, {inc for inc, _ in births})
        violations: list[Violation] = []
        checked = 0
        excused = {"zero_advantage": 0, "no_tokens": 0}
        # which instances a cell must snapshot depends on the step only through heals: in
        # an incarnation without any, a step with the normal cells and snapshot members
        # of a step found complete is complete too (a run's steps share a few shapes)
        complete: set[tuple[object, ...]] = set()
        for step in judged:
            normal_cells = step.normal_cells()
            normal = set(normal_cells)
            step_groups = by_key.get(step.key, [])
            shape = (step.incarnation, tuple(normal_cells), tuple(g.members for g in step_groups))
            if shape not in complete:
                absent = self._absent(step, normal, step_groups, layouts)
                if not absent and not layouts.healed(step.incarnation):
                    complete.add(shape)
                violations += absent
            tally = index.excused_of(step)
            for name, n in tally.items():
                excused[name] += n
            violations += self._mostly_excused(ctx, index, step, tally)
            if not step_groups:
                continue
            if step.key in cleared:  # every group matches: nothing to report
                checked += sum(len(g.members_in(normal)) for g in step_groups)
                continue
            window = index.active_window(step)
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
                members = g.members_in(normal)
                if not members:
                    continue
                checked += len(members)
                born = [m for m in members if (step.incarnation, m[2]) in births]
                old = [m for m in members if m not in born]
                if old:
                    violations += self._compare(ctx, index, window, step, g, old)
                for m in born:  # a new instance: only what was allocated since it exists
                    since = window.expected_since(births[(step.incarnation, m[2])])
                    violations += self._compare(ctx, index, window, step, g, [m], since)
        counts = {f"excused_{name}": n for name, n in excused.items()}
        return RuleOutcome(checked, tuple(violations), counts=counts)

    # -- checks -------------------------------------------------------------------------
    def _absent(
        self,
        step: CommittedStep,
        normal: set[int],
        groups: list[SnapshotGroup],
        layouts: InstanceLayouts,
    ) -> list[Violation]:
        present: dict[int, set[str]] = defaultdict(set)
        for g in groups:
            for cell, _, instance in g.members:
                present[cell].add(instance)
        out = []
        for cell in sorted(normal):
            if not present[cell]:
                where = Location(step.step, step.attempt, step.incarnation, cell=cell)
                out.append(
                    self.violation(
                        f"cell {cell} was normal in step {step.step} (attempt {step.attempt}) "
                        "but logged no witness snapshot: its training cannot be verified",
                        kind="missing_snapshot",
                        location=where,
                    )
                )
                continue
            expected = layouts.expected(step.incarnation, cell, step.step)
            if expected <= present[cell]:
                continue  # the usual case: no instance missing, nothing to sort
            for instance in sorted(expected):
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
        self, ctx: RunContext, index: CoverageModel, step: CommittedStep, tally: dict[str, int]
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
        index: CoverageModel,
        window: ActiveWindow,
        step: CommittedStep,
        group: SnapshotGroup,
        members: list[tuple[int, int | None, str]],
        slots: Spans | None = None,
    ) -> list[Violation]:
        want = window.expected_slots if slots is None else slots
        expected = want - group.stale
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
        index: CoverageModel,
        window: ActiveWindow,
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
        index: CoverageModel,
        window: ActiveWindow,
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


def _ranks(ranks: list[int | None]) -> str:
    known = sorted(r for r in ranks if r is not None)
    if len(known) == 1:
        return f"rank {known[0]}"
    return f"ranks {_list(known)}"


def _list(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
