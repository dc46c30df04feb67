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
from ftaudit.verifier.coverage import CoverageModel, InstanceLayouts, snapshot_groups
from ftaudit.verifier.coverage_bulk import matching_steps
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
