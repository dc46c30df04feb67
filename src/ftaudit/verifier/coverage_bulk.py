"""The witness coverage model for every committed step at once: which steps' snapshots
match it, cleared in one pass so that FT004 compares only the rest one by one.

Compared a step at a time, a healthy step is a few set operations on one or two spans,
where numpy's cost per call is most of the work (0.1 ms a step: a second of a
10,000-step run). Here the sets of all the snapshot groups are laid side by side, each
in a band of its own, ``[row * (B + 1), row * (B + 1) + B)``: bands never touch, so no
span joins two of them, and one pass of set algebra over the bands answers for every
group.

The pass only clears. A step it clears has every snapshot group's nonzero and expected
slots differ at most on that group's stale slots, which is what FT004 checks of a step
whose window holds no overlapping or excused allocation and no newly born instance.
Every other step (those cases, an unknown counter, ids outside the ring, any difference)
goes to the rule's one-by-one comparison, which alone writes violations. The report's
per-step coverage (:func:`step_coverage`) counts a cleared step the same way.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from ftaudit.eventlog.arrays import concat_ranges
from ftaudit.verifier.context import CommittedStep, RunContext, StepKey
from ftaudit.verifier.coverage import (
    CoverageModel,
    SnapshotGroup,
    StepCoverage,
    snapshot_groups,
)
from ftaudit.verifier.spans import Bands

_I64 = np.int64


def matching_steps(
    model: CoverageModel,
    steps: Sequence[CommittedStep],
    groups: dict[StepKey, list[SnapshotGroup]],
    born: Collection[int] = (),
) -> set[StepKey]:
    """The committed steps (of ``steps``, each with snapshot groups) whose every group
    matches its expected slots as :meth:`CoverageModel.active_window` builds them.

    ``born``: incarnations with instances new to them, whose groups are compared with
    another expectation (:meth:`ActiveWindow.expected_since`): never cleared here.
    """
    B = model.B
    bands = Bands(0, B + 1)  # ring slots: [0, B)
    todo = [s for s in steps if s.key in groups and s.incarnation not in born]
    counters = [model.counter_at(s) for s in todo]
    todo = [s for s, c in zip(todo, counters, strict=True) if c is not None]
    hi = np.fromiter((c for c in counters if c is not None), _I64, len(todo))
    if not todo or B < 1 or not bands.fits(sum(len(groups[s.key]) for s in todo)):
        return set()
    simple, step_of, starts, ends = _expected_slots(model, todo, hi)
    rows: list[SnapshotGroup] = []
    row_step: list[int] = []
    for k, step in enumerate(todo):
        if simple[k]:
            rows += groups[step.key]
            row_step += [k] * len(groups[step.key])
    if not rows:
        return set()
    step_of_row = np.asarray(row_step, _I64)
    rows_of_step = np.bincount(step_of_row, minlength=len(todo))
    first_row = np.cumsum(rows_of_step) - rows_of_step
    # each step's expected slots, once in the band of each of its groups
    copies = rows_of_step[step_of]
    expected = bands.pieces(
        concat_ranges(first_row[step_of], copies),
        np.repeat(starts, copies),
        np.repeat(ends, copies),
    )
    nonzero, nonzero_fit = bands.lay([g.nonzero for g in rows])
    stale, stale_fit = bands.lay([g.stale for g in rows])
    differ = ((expected - nonzero) | (nonzero - expected)) - stale
    bad = np.zeros(len(todo), dtype=bool)
    bad[step_of_row[~(nonzero_fit & stale_fit)]] = True
    bad[step_of_row[bands.rows_of(differ)]] = True
    return {step.key for k, step in enumerate(todo) if simple[k] and not bad[k]}


def _expected_slots(
    model: CoverageModel, steps: list[CommittedStep], hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per step: whether its window is simple (no two allocations own one position, no
    excused id), and the ring slots it expects nonzero, as (step, start, end) pieces.
    What :meth:`CoverageModel.active_window` gives a simple window.

    A window holds some 180 allocations at B = 1,048,576 and 4,096 ids a step, most of
    them touching and committed: they are taken as chains (touching allocations, all
    committed or all not), a few per window. No allocation ends before it starts: the
    load rejects a ``num_ids`` its ids do not hold (:mod:`ftaudit.verifier.validation`)."""
    B = model.B
    inc = np.fromiter((s.incarnation for s in steps), _I64, len(steps))
    lo = hi - np.minimum(model.keep, hi)
    simple = np.ones(len(steps), dtype=bool)
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for incarnation in sorted(set(inc.tolist())):
        which = np.flatnonzero(inc == incarnation)
        # what a step of this incarnation sees: allocations of it and before, by end
        seen = model.by_end[model.inc[model.by_end] <= incarnation]
        s, e, ok = model.start[seen], model.end[seen], model.committed[seen]
        first = np.searchsorted(e, lo[which], side="right")
        last = np.searchsorted(e, hi[which], side="right") - 1  # first - 1: none
        some = last >= first
        which, first, last = which[some], first[some], last[some]
        # one allocation starting before the one before it (by end) ends: ids re-issued,
        # the latest owns them, which the rule works out one by one
        clashes = np.concatenate(([0], np.cumsum(s[1:] < e[:-1])))
        simple[which[clashes[last] > clashes[first]]] = False
        new = np.ones(s.size, dtype=bool)
        new[1:] = (s[1:] != e[:-1]) | (ok[1:] != ok[:-1])
        chain = np.cumsum(new) - 1
        heads = np.flatnonzero(new)
        chain_start, chain_ok = s[heads], ok[heads]
        chain_end = e[np.concatenate((heads[1:], [s.size])) - 1]
        count = chain[last] - chain[first] + 1
        step_of = np.repeat(which, count)
        c = concat_ranges(chain[first], count)
        # clipped to the window: from lo to the end of its last allocation
        starts = np.maximum(chain_start[c], lo[step_of])
        ends = np.minimum(chain_end[c], np.repeat(e[last], count))
        kept = chain_ok[c] & (ends > starts)
        pieces.append((step_of[kept], starts[kept], ends[kept]))
    excused = np.searchsorted(model.exc_pos, hi, side="left") - np.searchsorted(
        model.exc_pos, lo, side="left"
    )
    simple &= excused == 0
    step_of, s, e = (np.concatenate(p) for p in zip(*pieces, strict=True))
    # positions to slots: a window is shorter than the ring, so a piece wraps at most once
    first_slot = s % B
    end_slot = first_slot + (e - s)
    wraps = end_slot > B
    return (
        simple,
        np.concatenate((step_of, step_of[wraps])),
        np.concatenate((first_slot, np.zeros(int(wraps.sum()), _I64))),
        np.concatenate((np.minimum(end_slot, B), end_slot[wraps] - B)),
    )


def step_coverage(ctx: RunContext) -> list[StepCoverage]:
    """Expected against seen witness slots per committed step, as FT004 compares them (a
    step :func:`matching_steps` clears expects exactly the slots it shows)."""
    B = ctx.buffer_size
    if B is None or not ctx.allocations:
        return []
    groups = snapshot_groups(ctx)
    model = CoverageModel(ctx, ctx.allocations, B)
    cleared = matching_steps(model, ctx.committed, groups)
    out = []
    for step in ctx.committed:
        normal = set(step.normal_cells())
        matches = step.key in cleared
        window = None if matches else model.active_window(step)
        expected = seen = missing = extra = snapshots = 0
        for g in groups.get(step.key, []):
            members = len(g.members_in(normal))
            if not members or (window is None and not matches):
                continue
            got = g.nonzero - g.stale
            want = got if window is None else window.expected_slots - g.stale
            snapshots += members
            expected += members * len(want)
            seen += members * len(got)
            missing += members * len(want - got)
            extra += members * len(got - want)
        out.append(
            StepCoverage(
                step.step,
                step.attempt,
                step.incarnation,
                snapshots,
                expected,
                seen,
                missing,
                extra,
            )
        )
    return out
