"""FT005 sample-exactly-once."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import Allocation, RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.rules.base import MAX_IDS, Rule, RuleOutcome, order_severity
from ftaudit.verifier.rules.stream_ledger import StreamLedger, TrainedSpans, stream_ledger
from ftaudit.verifier.spans import Spans, multiply_covered, union_all


@dataclass(frozen=True)
class _Shift:
    """A resumed incarnation whose stream starts at ``got`` instead of ``want``."""

    incarnation: int
    iteration: int
    want: int
    got: int


@dataclass
class _ShiftsFound:
    """The shifted resumed streams a follower found at earlier polls, by incarnation: a
    later window no longer holds the checkpoint's steps that show the shift, yet the
    duplicates, holes and differing replays it shows are still the shift's."""

    by_incarnation: dict[int, _Shift] = field(default_factory=dict)


def _sample_spans(a: Allocation) -> tuple[np.ndarray, np.ndarray]:
    starts = np.asarray(a.sample_indices.starts, dtype=np.int64)
    return starts, starts + np.asarray(a.sample_indices.lengths, dtype=np.int64)


class SampleExactlyOnce(Rule):
    """No sample index is trained twice in the committed history, and none is skipped.

    A sample index is the sample's position in the run's data stream (a consumed-samples
    counter; see docs/trainer_hooks.md for a DistributedSampler or a stateful loader).
    Across the committed allocations no sample index appears twice, and the committed
    indices form one contiguous range from 0: a hole is an error where the run declares
    a deterministic data order, a warning otherwise. A step replayed after a restart
    trains the same samples as the abandoned incarnation did (again an error only under
    a declared deterministic order). A resumed incarnation whose stream does not continue
    right after its checkpoint's is reported once, as the root cause, with the per-step
    duplicates or holes it caused as its details.

    Fails::

        step 0 (committed): witness_allocated samples [0, 1, 2, 3]
        step 1 (committed): witness_allocated samples [3, 4, 5, 6]
        -> FT005: sample [3] was trained in committed steps 0 and 1

    Passes::

        step 1 (committed): witness_allocated samples [4, 5, 6, 7]
    """

    code = "FT005"
    name = "sample-exactly-once"
    kinds: ClassVar[dict[str, str]] = {
        "duplicate_sample": "a sample index trained more than once in the committed history",
        "skipped_sample": "the committed sample stream has a hole below its highest index",
        "replay_differs": "a step replayed after a restart trained other samples than before",
        "resumed_stream_replays": "a resumed incarnation's data stream restarted behind its "
        "checkpoint's, replaying samples (the per-step duplicates are its details)",
        "resumed_stream_skips": "a resumed incarnation's data stream restarted ahead of its "
        "checkpoint's, skipping samples",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        keys = ctx.committed_keys
        committed = [a for a in ctx.allocations if a.key in keys and a.num_ids > 0]
        out: list[Violation] = []
        undeclared = ctx.deterministic_order is None and ctx.scope is None
        ledger = stream_ledger(ctx)
        if committed:
            window = TrainedSpans.of(committed)
            shifts = self._resumed_streams(ctx, window, ledger)
            trained = window
            if ledger is not None:  # the samples the judged steps trained again, long after
                judged = window.take(window.step >= ctx.since)
                trained = TrainedSpans.joined([window, ledger.trained_before(judged.covered())])
            duplicates = self._duplicates(ctx, trained)
            skipped = self._skipped(ctx, window)
            replays = self._replays(ctx, committed)
            out += self._headlines(ctx, shifts, [*duplicates, *skipped, *replays])
        else:
            out += self._replays(ctx, committed)
        note = _UNDECLARED if undeclared else _INCREMENTAL if ctx.scope is not None else ""
        return RuleOutcome(len(committed), tuple(out), note=note)

    def _resumed_streams(
        self, ctx: RunContext, trained: TrainedSpans, ledger: StreamLedger | None
    ) -> list[_Shift]:
        """Each resumed incarnation whose stream does not continue its checkpoint's.

        The checkpoint's stream ends after the highest sample index its lineage committed
        up to the checkpoint iteration; the resumed incarnation's first committed step
        should start right after it. A follower keeps the shifts its earlier polls found
        (:class:`_ShiftsFound`): the consequences later windows show are grouped under them.
        It also sees the steps before its window in its ``ledger``: a loader restored to a
        batch trained long before is a shift there too, as offline.
        """
        found = ctx.carried(_ShiftsFound).by_incarnation
        for inc in ctx.incarnations.values():
            c = inc.resumed_iteration
            if c is None or not ctx.new_incarnation(inc.incarnation):
                continue
            first = trained.take((trained.incarnation == inc.incarnation) & (trained.step == c + 1))
            before = trained.take(trained.step <= c)
            ends = [int(before.end.max())] if len(before) else []
            if ledger is not None and ledger.covered:  # every folded step is before c's
                ends.append(int(ledger.covered.ends[-1]))
            if not len(first) or not ends:
                continue
            want = max(ends)
            mine = first.covered()
            got = int(mine.starts[0])
            if got == want or len(mine.starts) != 1:
                continue  # continues, or not a stream at all (no position to restart from)
            # behind: the step replays an earlier committed step's batch (a loader back at
            # 0, or at the checkpoint step's batch); ahead: one block past a hole
            if ledger is not None:  # a restart off its checkpoint's position only: rare
                before = TrainedSpans.joined([ledger.all_folded(), before])
            near = np.unique(before.overlapping(mine).step).tolist()
            if got > want or any(before.take(before.step == s).covered() == mine for s in near):
                found[inc.incarnation] = _Shift(inc.incarnation, c, want, got)
        # a later resume from the shift's checkpoint or earlier re-ran the shifted steps
        return [
            shift
            for i, shift in sorted(found.items())
            if not ctx.rerun_after(i, shift.iteration + 1)
        ]

    def _headlines(
        self,
        ctx: RunContext,
        shifts: list[_Shift],
        found: list[Violation],
    ) -> list[Violation]:
        """One violation per root cause, its per-step findings grouped under it."""
        out = []
        rest = list(found)
        for shift in shifts:
            replays = shift.got < shift.want
            lo, hi = (shift.got, shift.want) if replays else (shift.want, shift.got)
            kind = "duplicate_sample" if replays else "skipped_sample"
            mine = [
                v
                for v in rest
                if (v.kind == kind and v.sample_indices and lo <= min(v.sample_indices) < hi)
                or (v.kind == "replay_differs" and v.location.incarnation == shift.incarnation)
            ]
            rest = [v for v in rest if v not in mine]
            named = ctx.describe_samples(np.arange(lo, min(hi, lo + MAX_IDS)), total=hi - lo)
            effect = (
                f"it replays samples {named}, which the checkpoint's lineage already trained, "
                "so the model sees them twice"
                if replays
                else f"it skips samples {named}, which are never trained"
            )
            out.append(
                self.violation(
                    f"the resumed data stream of incarnation {shift.incarnation} starts at "
                    f"sample {shift.got}, not at {shift.want} (right after checkpoint "
                    f"{shift.iteration}'s committed stream): {effect}; the data loader was "
                    "not restored to the checkpoint's position",
                    kind="resumed_stream_replays" if replays else "resumed_stream_skips",
                    location=Location(shift.iteration + 1, incarnation=shift.incarnation),
                    sample_indices=range(lo, min(hi, lo + MAX_IDS)),
                    id_count=hi - lo,
                    severity=Severity.ERROR if replays else order_severity(ctx),
                    details=[v.message for v in mine],
                )
            )
        return out + rest

    def _duplicates(self, ctx: RunContext, trained: TrainedSpans) -> list[Violation]:
        """The samples ``trained`` (committed spans, in logging order) holds twice, one
        violation per set of steps that trained them, located at the first and shown at
        the last (a sample trained again is news when its second training is judged)."""
        twice = multiply_covered(trained.start, trained.end)
        if not twice:
            return []
        # which steps trained each duplicated index: group the indices by those steps
        shown = twice.head(MAX_IDS)
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for sample in shown.tolist():
            hit = (trained.start <= sample) & (sample < trained.end)
            steps = tuple(sorted(set(trained.step[hit].tolist())))
            groups[steps].append(sample)
        out = []
        for steps, samples in groups.items():
            arr = np.asarray(samples, dtype=np.int64)
            first = int(np.flatnonzero(trained.step == steps[0])[0])
            count = len(twice) if len(groups) == 1 else len(samples)
            where = (
                f"more than once within committed step {steps[0]}"
                if len(steps) == 1
                else f"in more than one committed step (steps {', '.join(map(str, steps))})"
            )
            location = Location(
                steps[0], int(trained.attempt[first]), int(trained.incarnation[first])
            )
            out.append(
                self.violation(
                    f"{count} sample{'s' if count != 1 else ''} "
                    f"{ctx.describe_samples(arr, total=count)} trained {where}: the model saw "
                    f"{'them' if count != 1 else 'it'} twice",
                    kind="duplicate_sample",
                    location=location,
                    sample_indices=samples,
                    id_count=count,
                    shown_at=steps[-1] if len(steps) > 1 else None,
                )
            )
        return out

    def _skipped(self, ctx: RunContext, window: TrainedSpans) -> list[Violation]:
        trained = window.covered()
        if not trained:  # committed steps of no samples: nothing lies below a highest index
            return []
        top = int(trained.ends[-1])
        skipped = Spans.of([_bottom(ctx, window, trained)], [top]) - trained
        if not skipped:
            return []
        shown = skipped.head(MAX_IDS)
        severity = order_severity(ctx)
        why = (
            "although the run declares a deterministic data order"
            if severity is Severity.ERROR
            else "(a warning: the run does not declare a deterministic data order; sample "
            "indices must be stream positions, see docs/trainer_hooks.md)"
        )
        return [
            self.violation(
                f"{len(skipped)} samples {ctx.describe_samples(shown, total=len(skipped))} "
                f"below the highest committed index ({top - 1}) were never trained, {why}",
                kind="skipped_sample",
                sample_indices=shown.tolist(),
                id_count=len(skipped),
                severity=severity,
            )
        ]

    def _replays(self, ctx: RunContext, committed: list[Allocation]) -> list[Violation]:
        final = {a.step: a for a in committed}
        by_step: dict[int, list[Allocation]] = defaultdict(list)
        for a in committed:
            by_step[a.step].append(a)
        committed_incs = {s.step: s.incarnation for s in ctx.committed}
        # the latest attempt of each other incarnation, per step it allocated for
        latest: dict[tuple[int, int], list[Allocation]] = defaultdict(list)
        for a in ctx.allocations:
            if a.num_ids == 0 or committed_incs.get(a.step) in (None, a.incarnation):
                continue
            key = (a.incarnation, a.step)
            if latest[key] and latest[key][0].attempt < a.attempt:
                latest[key] = []
            if not latest[key] or latest[key][0].attempt == a.attempt:
                latest[key].append(a)
        severity = order_severity(ctx)
        out = []
        for (inc, step), abandoned in sorted(latest.items()):
            if step not in final:
                continue
            mine = union_all(Spans.of(*_sample_spans(a)) for a in by_step[step])
            theirs = union_all(Spans.of(*_sample_spans(a)) for a in abandoned)
            if mine == theirs:
                continue
            new, old = mine - theirs, theirs - mine
            only_new, only_old = new.head(MAX_IDS), old.head(MAX_IDS)
            c = final[step]
            note = (
                " (the run does not declare a deterministic data order)"
                if severity is Severity.WARNING
                else ""
            )
            out.append(
                self.violation(
                    f"step {step} was replayed by incarnation {c.incarnation} with different "
                    f"samples than abandoned incarnation {inc} trained{note}: only in the "
                    f"replay {ctx.describe_samples(only_new, total=len(new))}, only in the "
                    f"abandoned run {ctx.describe_samples(only_old, total=len(old))}",
                    kind="replay_differs",
                    location=Location(step, c.attempt, c.incarnation),
                    sample_indices=[*only_new.tolist(), *only_old.tolist()],
                    severity=severity,
                )
            )
        return out


def _bottom(ctx: RunContext, window: TrainedSpans, trained: Spans) -> int:
    """Where holes in the committed stream are looked for from: 0, or in an incremental
    verification where the stream stood before the judged steps (the end of the loaded
    committed steps before ``since``; earlier holes were the earlier checks'), else the
    lowest loaded sample. A step that jumps back below the loaded steps (a replay of
    samples long trained) does not make the stream between look unread."""
    if ctx.scope is None:
        return 0
    before = window.end[window.step < ctx.since]
    return int(before.max()) if before.size else int(trained.starts[0])


_INCREMENTAL = (
    "incremental verification: a sample trained again is compared with the loaded steps' "
    "samples (a follower's with every committed step's, from its ledger of the committed "
    "stream; a full ft-verify with all)"
)
_UNDECLARED = (
    "the run does not declare whether its data order is deterministic: holes in the sample "
    "stream and replays that trained other samples are warnings, not errors (declare "
    "deterministic_order at DriverSession.start)"
)
