"""FT004's bulk pass clears exactly the steps whose snapshots match the coverage model.

The pass may only clear a step the one-by-one comparison would find clean (a wrong
clear hides a defect); on runs without re-issued or excused ids it must clear every such
step (or it buys nothing). Both are checked on random runs built with the real
allocator: retried attempts (abandoned allocations in the window), restarts that resume
the counter or re-issue ids, and snapshots that lose, add or leave stale ids.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.coverage import (
    CoverageModel,
    InstanceLayouts,
    StepCoverage,
    snapshot_groups,
)
from ftaudit.verifier.coverage_bulk import matching_steps, step_coverage
from ftaudit.verifier.ring import max_per_step
from ftaudit.verifier.session import Session
from tests.support.builder import DISCARDED, HEAD, NORMAL, RunBuilder
from tests.verifier.rules.ft004_cases import CASES


def _cleared_and_matching(root: Path) -> tuple[set[StepKey], set[StepKey]]:
    """What the bulk pass clears, and which steps match as the rule checks one by one."""
    with Session.open(root) as session:
        ctx = RunContext(session)
        B = ctx.buffer_size
        assert B is not None
        model = CoverageModel(ctx, ctx.allocations, B)
        groups = snapshot_groups(ctx)
        born = {inc for inc, _ in model.births(ctx, InstanceLayouts(ctx))}
        cleared = matching_steps(model, ctx.committed, groups, born)
        matching = set()
        for step in ctx.committed:
            window = model.active_window(step)
            if step.key not in groups or step.incarnation in born or window is None:
                continue
            if all(
                window.expected_slots - g.stale == g.nonzero - g.stale for g in groups[step.key]
            ):
                matching.add(step.key)
    return cleared, matching


def _random_run(b: RunBuilder, rng: random.Random, *, reissue: bool) -> None:
    """Steps of 1-5 samples, some retried, a few snapshots wrong; one or two restarts
    from a checkpoint."""
    sample = step = 0
    saved: dict[int, int] = {}  # checkpointed step -> samples consumed by then
    run = b.start()
    for restart in range(rng.randint(1, 2) + 1):
        if restart and saved:
            resume = rng.choice(sorted(saved))
            run = b.start(
                resume_from=resume,
                resume_counter=max(0, b.max_counter - rng.randint(1, 2 * b.B)) if reissue else None,
            )
            step, sample = resume + 1, saved[resume]
        for _ in range(rng.randint(4, 14)):
            n = rng.randint(1, max_per_step(b.B))
            samples = range(sample, sample + n)
            sample += n
            retries = rng.choice((0, 0, 0, 1, 2))
            for attempt in range(retries):
                run.train(step, samples, attempt=attempt, cells={0: NORMAL, 1: DISCARDED})
            fault = rng.random()
            if fault < 0.1:  # a lost sample in one cell
                run.train(step, samples, attempt=retries, unseen={(1, HEAD): [sample - 1]})
            elif fault < 0.2:  # an id nobody allocated, or a stale slot left nonzero
                ids = run.train(step, samples, attempt=retries)
                run.snapshot(step, [*ids, rng.randrange(b.B)], attempt=retries, cell=1)
            else:
                run.train(step, samples, attempt=retries)
            if rng.random() < 0.3:
                run.checkpoint(step)
                saved[step] = sample
            step += 1
    run.finish()


@pytest.mark.parametrize("reissue", [False, True], ids=["resumed", "reissued"])
@pytest.mark.parametrize("seed", range(12))
def test_bulk_pass_clears_only_matching_steps(tmp_path: Path, seed: int, reissue: bool) -> None:
    rng = random.Random(seed)
    b = RunBuilder(tmp_path / "run", B=rng.choice((10, 16, 40)), cells=2)
    try:
        _random_run(b, rng, reissue=reissue)
    finally:
        b.close()
    cleared, matching = _cleared_and_matching(b.root)
    assert cleared <= matching, f"cleared steps that do not match: {cleared - matching}"
    if not reissue:
        assert cleared == matching, f"matching steps not cleared: {matching - cleared}"
    assert matching, "a random run with no matching step tests nothing"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_bulk_pass_clears_only_matching_steps_of_every_ft004_case(
    tmp_path: Path, case: object
) -> None:
    cleared, matching = _cleared_and_matching(case.write(tmp_path / "run"))  # type: ignore[attr-defined]
    assert cleared <= matching


def test_step_coverage_counts_what_the_one_by_one_comparison_counts(tmp_path: Path) -> None:
    """The report's coverage takes a cleared step's shown slots as its expected ones."""
    found = []
    for seed in range(6):
        rng = random.Random(seed)
        b = RunBuilder(tmp_path / f"run{seed}", B=rng.choice((10, 16, 40)), cells=2)
        try:
            _random_run(b, rng, reissue=seed % 2 == 1)
        finally:
            b.close()
        got, want = _coverage_both_ways(b.root)
        assert [
            (c.step, c.attempt, c.incarnation, c.snapshots, c.expected, c.seen, c.missing, c.extra)
            for c in got
        ] == want
        found += got
    assert any(c.missing or c.extra for c in found) and any(c.ok and c.seen for c in found)


def _coverage_both_ways(root: Path) -> tuple[list[StepCoverage], list[tuple[int, ...]]]:
    """``step_coverage``, and the same counts compared step by step."""
    with Session.open(root) as session:
        ctx = RunContext(session)
        got = step_coverage(ctx)
        model = CoverageModel(ctx, ctx.allocations, ctx.buffer_size or 0)
        groups = snapshot_groups(ctx)
        want = []
        for step in ctx.committed:
            window = model.active_window(step)
            counts = [0, 0, 0, 0, 0]  # snapshots, expected, seen, missing, extra
            for g in groups.get(step.key, []) if window is not None else []:
                n = sum(m[0] in step.normal_cells() for m in g.members)
                shown, due = g.nonzero - g.stale, window.expected_slots - g.stale
                for k, size in enumerate((1, len(due), len(shown), len(due - shown))):
                    counts[k] += n * size
                counts[4] += n * len(shown - due)
            want.append((step.step, step.attempt, step.incarnation, *counts))
    return got, want
