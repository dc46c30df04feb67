"""FT003 allocator-replay."""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import Allocation, RunContext, StepKey
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.ring import ids_runs, max_per_step, stale_runs
from ftaudit.verifier.rules.attempt_clears import cleared_attempts
from ftaudit.verifier.rules.base import MAX_IDS, Rule, RuleOutcome
from ftaudit.verifier.spans import Spans, union_all


class AllocatorReplay(Rule):
    """Every allocation is what the allocator, replayed from the log, would have made.

    Replaying the allocation events in order (one counter, never moving backwards, a
    resumed incarnation continuing from the highest counter any earlier incarnation
    logged): each allocation's ids are the next ``num_ids`` slots of the ring, its
    ``counter_after`` is the counter plus ``num_ids``, and its stale ids are the
    ``B - min(keep, C)`` slots from ``C mod B``. No resumed incarnation re-issues an id an
    earlier incarnation allocated; the buffer size never changes. Every attempt trains
    only on ring slots cleared since they last held a sample: within ``B - keep``
    positions of the last clear (a fresh ring, a resume, an accepted attempt, or a
    discarded attempt whose ranks logged ``witness_cleared``), so an attempt allocates at
    most ``B - keep`` ids and a retried step stays exact however often it is retried.

    Fails (B = 10)::

        incarnation 0: witness_allocated step 0 counter_after 3, step 1 counter_after 6
        incarnation 1 (resumed from checkpoint 0): witness_allocated step 1 counter_after 6
                       (ids [3, 4, 5] again)
        -> FT003: incarnation 1 re-issues ids [3..5] that incarnation 0 allocated

    Passes::

        incarnation 1: witness_allocated step 1 num_ids 0 counter_after 6 (allocate(0)),
                       witness_allocated step 1 counter_after 9 (ids [6, 7, 8])
    """

    code = "FT003"
    name = "allocator-replay"
    kinds: ClassVar[dict[str, str]] = {
        "buffer_size_changed": "incarnations declared different witness buffer sizes",
        "wrong_start_counter": "the first incarnation did not start the allocator at 0",
        "reissued_ids": "a resumed incarnation re-issued ids an earlier one allocated",
        "wrong_resume_counter": "a resumed incarnation did not continue from the highest counter",
        "replay_differs": "an allocation differs from what the replayed allocator gives",
        "over_budget": "an attempt used ring slots that were not cleared since their last use",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        allocations = ctx.allocations
        out: list[Violation] = self._sizes(ctx)
        B = ctx.buffer_size
        if not allocations or B is None:
            return RuleOutcome(len(allocations), tuple(out))
        by_inc: dict[int, list[Allocation]] = defaultdict(list)
        for a in allocations:
            by_inc[a.incarnation].append(a)
        clears = cleared_attempts(ctx)
        highest = 0  # the highest counter any earlier incarnation logged
        earlier: list[Allocation] = []
        for inc in sorted(by_inc):
            allocs = by_inc[inc]
            if ctx.incarnation_complete(inc):  # incremental: an old resume was judged before
                out += self._resume(ctx, inc, allocs, earlier, highest, B)
            counter = allocs[0].start if allocs[0].start >= 0 else 0
            for a in allocs:
                if a.step >= ctx.since:  # incremental: earlier steps were judged before
                    out += self._replay(a, counter, B)
                counter = a.counter_after
            out += self._budget(ctx, inc, allocs, clears, B)
            highest = max(highest, max(a.counter_after for a in allocs))
            earlier += allocs
        return RuleOutcome(len(allocations), tuple(out))

    def _sizes(self, ctx: RunContext) -> list[Violation]:
        sizes = {i.incarnation: i.buffer_size for i in ctx.incarnations.values()}
        if len(set(sizes.values())) <= 1:
            return []
        text = ", ".join(f"incarnation {k}: B={v}" for k, v in sorted(sizes.items()))
        return [
            self.violation(
                f"the witness buffer size changed between incarnations ({text}): the ring "
                "cannot be resized within a run",
                kind="buffer_size_changed",
            )
        ]

    def _resume(
        self,
        ctx: RunContext,
        inc: int,
        allocs: list[Allocation],
        earlier: list[Allocation],
        highest: int,
        B: int,
    ) -> list[Violation]:
        first = allocs[0]
        where = Location(first.step, first.attempt, inc, writer=first.writer, segment=first.segment)
        out = []
        if not earlier:
            if first.start != 0:
                out.append(
                    self.violation(
                        f"incarnation {inc} started the allocator at counter {first.start}, not 0",
                        kind="wrong_start_counter",
                        location=where,
                    )
                )
            return out
        mine = union_all(Spans.of([a.start], [a.counter_after]) for a in allocs)
        before = union_all(Spans.of([a.start], [a.counter_after]) for a in earlier)
        reissued = mine & before
        if reissued:
            positions = reissued.head(MAX_IDS)
            ids, samples, owners = [], [], set()
            for a in earlier:
                hit = positions[(positions >= a.start) & (positions < a.counter_after)]
                if hit.size:
                    ids += (hit % B).tolist()
                    samples += a.samples_at(hit).tolist()
                    owners.add(ctx.describe_key(a.key))
            lowest = int(reissued.head(1)[0])
            named = ctx.describe_samples(np.asarray(samples), total=len(reissued))
            out.append(
                self.violation(
                    f"incarnation {inc} allocated from counter {lowest}, below the highest "
                    f"counter ever logged before it ({highest}): it re-issues "
                    f"{len(reissued)} ids {Spans.from_ids(np.asarray(ids)).describe()} that "
                    f"were allocated to samples {named} by "
                    f"{'; '.join(sorted(owners))}; weights that were not rolled back would "
                    "be counted as this incarnation's",
                    kind="reissued_ids",
                    location=where,
                    ids=ids,
                    sample_indices=samples,
                    id_count=len(reissued),
                )
            )
        elif first.start != highest:
            out.append(
                self.violation(
                    f"incarnation {inc} resumed the allocator at counter {first.start}, not at "
                    f"the highest counter ever logged ({highest})",
                    kind="wrong_resume_counter",
                    location=where,
                )
            )
        return out

    def _replay(self, a: Allocation, counter: int, B: int) -> list[Violation]:
        where = Location(a.step, a.attempt, a.incarnation, writer=a.writer, segment=a.segment)
        problems = []
        if a.num_ids > B:
            problems.append(f"it allocates {a.num_ids} ids from a ring of {B}")
        after = counter + a.num_ids
        if a.counter_after != after:
            problems.append(f"counter_after is {a.counter_after}, the replay gives {after}")
        want_ids = ids_runs(after, a.num_ids, B) if a.num_ids <= B else None
        if want_ids is not None and a.witness_ids != want_ids:
            got = Spans.from_runs(a.witness_ids)
            problems.append(
                f"its ids are {got.describe()} (in order {a.witness_ids.to_list()[:12]}), the "
                f"replay gives {Spans.from_runs(want_ids).describe()} from counter {counter}"
            )
        stale = stale_runs(after, B)
        # the same runs are the same set (the usual case: no set algebra)
        if a.stale_ids.starts != stale.starts or a.stale_ids.lengths != stale.lengths:
            want_stale = Spans.from_runs(stale)
            got_stale = Spans.from_runs(a.stale_ids)
            if got_stale != want_stale:
                problems.append(
                    f"its stale ids are {got_stale.describe()}, the replay gives "
                    f"{want_stale.describe()}"
                )
        if not problems:
            return []
        ids = Spans.from_runs(a.witness_ids).head(MAX_IDS)
        return [
            self.violation(
                f"the allocation of step {a.step} attempt {a.attempt} (incarnation "
                f"{a.incarnation}) differs from the replayed allocator: " + "; ".join(problems),
                kind="replay_differs",
                location=where,
                ids=ids.tolist(),
                id_count=a.num_ids,
            )
        ]

    def _budget(
        self, ctx: RunContext, inc: int, allocs: list[Allocation], clears: set[StepKey], B: int
    ) -> list[Violation]:
        """Each attempt trains on slots cleared since they last held a sample.

        Known-clean counter positions: the whole ring at a fresh start, the ``B - keep``
        positions after the counter at a resume and after every attempt that cleared its
        stale slots (an accepted attempt, or a discarded one whose ranks logged
        ``witness_cleared``). An attempt reaching beyond them trains on rows that may
        still hold older evidence.
        """
        room = max_per_step(B)
        first = allocs[0]
        if not ctx.incarnation_complete(inc):
            clean = None  # incremental: the clears before the loaded events are unknown
        elif ctx.incarnations.get(inc) is None or ctx.incarnations[inc].resumed_iteration is None:
            clean = Spans.of([first.start], [first.start + B])  # fresh, all-zero witnesses
        else:
            clean = Spans.of([first.start], [first.start + room])
        last: Allocation | None = None
        out = []
        for a in allocs:
            # incremental: earlier attempts only bring their clears; the usual attempt,
            # within its room and on clean positions, costs no set algebra
            if a.step >= ctx.since and a.num_ids and not self._within(a, clean, room):
                # the driver's contract: one attempt allocates at most B - keep ids
                dirty = Spans.of([a.start + room], [max(a.start + room, a.counter_after)])
                if clean is not None:
                    dirty = dirty | (Spans.of([a.start], [a.counter_after]) - clean)
                if dirty:
                    out.append(self._over_budget(ctx, a, dirty, last, room, B))
            if a.key in clears:
                fresh = Spans.of([a.counter_after], [a.counter_after + room])
                clean = fresh if clean is None else clean | fresh
                last = a
        return out

    @staticmethod
    def _within(a: Allocation, clean: Spans | None, room: int) -> bool:
        """Whether ``a`` keeps within ``room`` ids and on ``clean`` positions (all, when
        None), i.e. whether the dirty positions :meth:`_budget` computes are none."""
        return a.counter_after <= a.start + room and (
            clean is None or clean.covers(a.start, a.counter_after)
        )

    def _over_budget(
        self,
        ctx: RunContext,
        a: Allocation,
        dirty: Spans,
        last: Allocation | None,
        room: int,
        B: int,
    ) -> Violation:
        positions = dirty.head(MAX_IDS)
        since = (
            f"the last clear before it, after {ctx.describe_key(last.key)}, cleared counter "
            f"positions up to {last.counter_after + room - 1}"
            if last is not None
            else "no clear preceded it in this incarnation"
        )
        return self.violation(
            f"{ctx.describe_key(a.key)} trained {len(dirty)} sample(s) on ring slots not "
            f"cleared since they last held a sample (counter positions {dirty.describe()}; "
            f"{since}): their rows may hold older evidence, which hides a lost gradient. "
            f"Keep each attempt within B - keep = {room} ids, and after a discarded attempt "
            "zero its stale ids on every rank (TrainerHooks.after_discard) before retrying",
            kind="over_budget",
            location=Location(a.step, a.attempt, a.incarnation, writer=a.writer, segment=a.segment),
            ids=(positions % B).tolist(),
            sample_indices=a.samples_at(positions).tolist(),
            id_count=len(dirty),
        )
