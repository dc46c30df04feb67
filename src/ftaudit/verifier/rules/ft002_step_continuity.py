"""FT002 step-continuity."""

from __future__ import annotations

from collections import Counter
from typing import ClassVar

import numpy as np

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Location, Violation
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.spans import Spans

FIRST_STEPS = """
    SELECT incarnation, min(step) AS first_step FROM events
    WHERE source_kind = 'driver' AND step IS NOT NULL
    GROUP BY incarnation ORDER BY incarnation"""
"""The first step each incarnation's driver worked on (trainers may tag restore events
with the checkpoint's step, so only the driver's count)."""


class StepContinuity(Rule):
    """Every step from 0 to the last is committed exactly once, each by a valid attempt.

    The committed history (the final incarnation back through the checkpoints it resumed
    from) holds one accepted attempt per step, with no step skipped or committed twice.
    A resumed incarnation starts at its checkpoint's iteration + 1 (a fresh one at 0).
    The accepted attempt obeys the acceptance policy: it is retried instead when every
    cell errored or any cell discarded it.

    Fails::

        incarnation 0: step_end 0, step_end 1, checkpoint_saved 1, step_end 2
        incarnation 1 (resumed from checkpoint 1 of incarnation 0): step_end 3
        -> FT002: step 2 was never committed (incarnation 1 resumed at 3, not 2)

    Passes::

        incarnation 1 (resumed from checkpoint 1 of incarnation 0): step_end 2, step_end 3
    """

    code = "FT002"
    name = "step-continuity"
    kinds: ClassVar[dict[str, str]] = {
        "committed_twice": "a step was committed by more than one attempt or incarnation",
        "never_committed": "a step below the last one was never committed",
        "accepted_all_errored": "an attempt was accepted although every cell errored",
        "accepted_despite_discard": "an attempt was accepted although a cell discarded it",
        "wrong_first_step": "an incarnation did not begin at its checkpoint iteration + 1",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        committed = ctx.committed
        out: list[Violation] = []
        counts = Counter(s.step for s in committed)
        for step, n in sorted(counts.items()):
            if n > 1:
                incs = sorted({s.incarnation for s in committed if s.step == step})
                out.append(
                    self.violation(
                        f"step {step} was committed {n} times (incarnation "
                        f"{', '.join(map(str, incs))}): its samples were applied more than once",
                        kind="committed_twice",
                        location=Location(step=step, incarnation=incs[0]),
                    )
                )
        if counts:
            steps = np.fromiter(counts, np.int64)
            # incremental: the steps before ``since`` were checked before
            gaps = Spans.of([ctx.since], [int(steps.max()) + 1]) - Spans.from_ids(steps)
            for s, e in zip(gaps.starts.tolist(), gaps.ends.tolist(), strict=True):
                what = f"step {s} was" if e - s == 1 else f"steps {s}..{e - 1} were"
                out.append(
                    self.violation(
                        f"{what} never committed: the final model's history skips "
                        f"{'it' if e - s == 1 else 'them'}, so its samples were never trained",
                        kind="never_committed",
                        location=Location(step=s),
                    )
                )
        out += self._policy(ctx)
        out += self._resume_points(ctx)
        return RuleOutcome(len(committed), tuple(out))

    def _policy(self, ctx: RunContext) -> list[Violation]:
        out = []
        for s in ctx.committed:
            if s.step < ctx.since:
                continue  # incremental: judged before (and not reported again)
            discarded = sorted(c for c, r in s.cells.items() if r.discarded)
            if not s.cells or all(r.errored for r in s.cells.values()):
                where = Location(step=s.step, attempt=s.attempt, incarnation=s.incarnation)
                out.append(
                    self.violation(
                        f"step {s.step} accepted attempt {s.attempt} although every cell "
                        "errored: no cell applied its update, it should have been retried",
                        kind="accepted_all_errored",
                        location=where,
                    )
                )
            elif discarded:
                out.append(
                    self.violation(
                        f"step {s.step} accepted attempt {s.attempt} although cell "
                        f"{', '.join(map(str, discarded))} discarded it: it should have been "
                        "retried",
                        kind="accepted_despite_discard",
                        location=Location(
                            step=s.step,
                            attempt=s.attempt,
                            incarnation=s.incarnation,
                            cell=discarded[0],
                        ),
                    )
                )
        return out

    def _resume_points(self, ctx: RunContext) -> list[Violation]:
        out: list[Violation] = []
        incs = ctx.incarnations
        # incremental: the others' first steps were not loaded, nor are they judged now
        complete = {i for i in incs if ctx.incarnation_complete(i)}
        if not complete:
            return out  # none loaded whole (a follower's every poll): nothing to ask
        for r in ctx.rows(FIRST_STEPS, label="FT002 first steps"):
            inc = incs.get(r["incarnation"])
            if inc is None:
                continue  # FT001 reports an incarnation without a start
            if inc.incarnation not in complete:
                continue
            expected = 0 if inc.resumed_iteration is None else inc.resumed_iteration + 1
            if r["first_step"] != expected:
                where = (
                    f"resumed from checkpoint {inc.resumed_iteration}"
                    if inc.resumed_iteration is not None
                    else "started fresh"
                )
                out.append(
                    self.violation(
                        f"incarnation {inc.incarnation} {where} but began at step "
                        f"{r['first_step']}, not {expected}",
                        kind="wrong_first_step",
                        location=Location(step=r["first_step"], incarnation=inc.incarnation),
                    )
                )
        return out
