"""FT005 sample-exactly-once."""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import Allocation, RunContext
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.rules.base import MAX_IDS, Outcome, Rule
from ftaudit.verifier.spans import Spans, multiply_covered, union_all


def _sample_spans(a: Allocation) -> tuple[np.ndarray, np.ndarray]:
    starts = np.asarray(a.sample_indices.starts, dtype=np.int64)
    return starts, starts + np.asarray(a.sample_indices.lengths, dtype=np.int64)


class SampleExactlyOnce(Rule):
    """No sample index is trained twice in the committed history, and none is skipped.

    Across the committed allocations no sample index appears twice. Where the run
    declares a deterministic data order, the committed indices form one range from 0.
    A step replayed after a restart trains the same samples as the abandoned
    incarnation did (a warning instead of an error when the order is declared
    non-deterministic).

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
    }

    def check(self, ctx: RunContext) -> Outcome:
        keys = ctx.committed_keys
        committed = [a for a in ctx.allocations if a.key in keys and a.num_ids > 0]
        out: list[Violation] = []
        if committed:
            out += self._duplicates(ctx, committed)
            if ctx.deterministic_order:
                out += self._skipped(ctx, committed)
        out += self._replays(ctx, committed)
        return Outcome(len(committed), tuple(out))

    def _duplicates(self, ctx: RunContext, committed: list[Allocation]) -> list[Violation]:
        pairs = [_sample_spans(a) for a in committed]
        owner = np.concatenate([np.full(s.size, i) for i, (s, _) in enumerate(pairs)])
        starts = np.concatenate([s for s, _ in pairs])
        ends = np.concatenate([e for _, e in pairs])
        twice = multiply_covered(starts, ends)
        if not twice:
            return []
        # which steps trained each duplicated index: group the indices by those steps
        shown = twice.head(MAX_IDS)
        groups: dict[tuple[int, ...], list[int]] = defaultdict(list)
        for sample in shown.tolist():
            hit = owner[(starts <= sample) & (sample < ends)]
            steps = tuple(sorted({committed[i].step for i in hit.tolist()}))
            groups[steps].append(sample)
        out = []
        for steps, samples in groups.items():
            arr = np.asarray(samples, dtype=np.int64)
            first = next(a for a in committed if a.step == steps[0])
            count = len(twice) if len(groups) == 1 else len(samples)
            where = (
                f"more than once within committed step {steps[0]}"
                if len(steps) == 1
                else f"in more than one committed step (steps {', '.join(map(str, steps))})"
            )
            out.append(
                self.violation(
                    f"{count} sample{'s' if count != 1 else ''} "
                    f"{ctx.describe_samples(arr, total=count)} trained {where}: the model saw "
                    f"{'them' if count != 1 else 'it'} twice",
                    kind="duplicate_sample",
                    location=Location(first.step, first.attempt, first.incarnation),
                    sample_indices=samples,
                    id_count=count,
                )
            )
        return out

    def _skipped(self, ctx: RunContext, committed: list[Allocation]) -> list[Violation]:
        trained = union_all(Spans.of(*_sample_spans(a)) for a in committed)
        top = int(trained.ends[-1])
        # incremental: only the loaded steps' samples are known; earlier ones were checked
        bottom = 0 if ctx.window is None else int(trained.starts[0])
        skipped = Spans.of([bottom], [top]) - trained
        if not skipped:
            return []
        shown = skipped.head(MAX_IDS)
        return [
            self.violation(
                f"{len(skipped)} samples {ctx.describe_samples(shown, total=len(skipped))} "
                "below the highest "
                f"committed index ({top - 1}) were never trained, although the run declares a "
                "deterministic data order",
                kind="skipped_sample",
                sample_indices=shown.tolist(),
                id_count=len(skipped),
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
        severity = Severity.WARNING if ctx.deterministic_order is False else Severity.ERROR
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
                " (the run declares a non-deterministic data order)"
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
