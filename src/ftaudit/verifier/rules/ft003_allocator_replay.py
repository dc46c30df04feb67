"""FT003 allocator-replay."""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import Allocation, RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.ring import ids_runs, max_per_step, stale_runs
from ftaudit.verifier.rules.base import MAX_IDS, Outcome, Rule
from ftaudit.verifier.spans import Spans, union_all


class AllocatorReplay(Rule):
    """Every allocation is what the allocator, replayed from the log, would have made.

    Replaying the allocation events in order (one counter, never moving backwards, a
    resumed incarnation continuing from the highest counter any earlier incarnation
    logged): each allocation's ids are the next ``num_ids`` slots of the ring, its
    ``counter_after`` is the counter plus ``num_ids``, and its stale ids are the
    ``B - min(keep, C)`` slots from ``C mod B``. No resumed incarnation re-issues an id an
    earlier incarnation allocated; no step allocates more than ``B - keep`` ids; the
    buffer size never changes.

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

    def check(self, ctx: RunContext) -> Outcome:
        allocations = ctx.allocations
        out: list[Violation] = self._sizes(ctx)
        B = ctx.buffer_size
        if not allocations or B is None:
            return Outcome(len(allocations), tuple(out))
        by_inc: dict[int, list[Allocation]] = defaultdict(list)
        for a in allocations:
            by_inc[a.incarnation].append(a)
        highest = 0  # the highest counter any earlier incarnation logged
        earlier: list[Allocation] = []
        for inc in sorted(by_inc):
            allocs = by_inc[inc]
            if ctx.incarnation_complete(inc):  # incremental: an old resume was judged before
                out += self._resume(ctx, inc, allocs, earlier, highest, B)
            counter = allocs[0].start if allocs[0].start >= 0 else 0
            for a in allocs:
                out += self._replay(a, counter, B)
                counter = a.counter_after
            out += self._per_step(allocs, B)
            highest = max(highest, max(a.counter_after for a in allocs))
            earlier += allocs
        return Outcome(len(allocations), tuple(out))

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
            out.append(
                self.violation(
                    f"incarnation {inc} allocated from counter {lowest}, below the highest "
                    f"counter ever logged before it ({highest}): it re-issues "
                    f"{len(reissued)} ids {Spans.from_ids(np.asarray(ids)).describe()} that "
                    f"were allocated to samples {ctx.describe_samples(np.asarray(samples))} by "
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
        want_stale = Spans.from_runs(stale_runs(after, B))
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

    def _per_step(self, allocs: list[Allocation], B: int) -> list[Violation]:
        limit = max_per_step(B)
        totals: dict[int, int] = defaultdict(int)
        for a in allocs:
            totals[a.step] += a.num_ids
        out = []
        for step, total in sorted(totals.items()):
            if total > limit:
                a = next(x for x in allocs if x.step == step)
                out.append(
                    self.violation(
                        f"step {step} allocated {total} witness ids (all attempts), more than "
                        f"B - keep = {limit}: slots were reused before being cleared, so the "
                        "witness can no longer tell samples apart",
                        kind="over_budget",
                        location=Location(step=step, incarnation=a.incarnation),
                    )
                )
        return out
