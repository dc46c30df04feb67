"""A follower keeps the attempts after which the trainers cleared the ring
(``verifier.rules.attempt_clears``, FT003) instead of asking ``CLEARS`` of its window at
every poll: at each poll it must hold exactly the query's rows over the same window,
as segments join it and leave it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.rules import attempt_clears, ft003_allocator_replay
from tests.support.builder import DISCARDED, NORMAL, RunBuilder


def test_a_followers_clears_are_the_querys_at_every_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[set[StepKey]] = []
    kept = attempt_clears.cleared_attempts

    def both(ctx: RunContext) -> set[StepKey]:
        got = kept(ctx)
        if ctx.following:  # the final verdict asks the query itself
            rows = ctx.rows(attempt_clears.CLEARS, label="test: clears")
            assert got == {(r["incarnation"], r["step"], r["attempt"]) for r in rows}
            compared.append(got)
        return got

    monkeypatch.setattr(ft003_allocator_replay, "cleared_attempts", both)
    b = RunBuilder(tmp_path / "run", B=16, cells=2)
    online = OnlineVerifier(tmp_path / "run", select=["FT003"])
    run = b.start()
    for step in range(14):
        samples = [3 * step, 3 * step + 1]
        if (
            step % 2
        ):  # a discarded attempt, whose ranks clear at odd steps 1, 5, 9..., then its retry
            clear = step % 4 == 1
            run.train(step, samples, cells={0: NORMAL, 1: DISCARDED}, clear_on_discard=clear)
            run.train(step, samples, attempt=1)
        else:
            run.train(step, samples)
        run.flush()
        online.poll()
    run.finish()
    b.close()
    assert online.poll().finished
    seen = set().union(*compared)
    assert {(0, 1, 0), (0, 5, 0), (0, 9, 0)} <= seen  # discarded, and their ranks cleared
    assert not {(0, 3, 0), (0, 7, 0), (0, 11, 0)} & seen  # discarded, not cleared
    assert {(0, 11, 1), (0, 12, 0)} <= seen  # accepted
    # the window moved: the first steps' clears left it
    first = next(i for i, keys in enumerate(compared) if (0, 0, 0) in keys)
    assert any((0, 0, 0) not in keys for keys in compared[first:])
