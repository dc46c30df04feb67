"""A follower keeps which witness instances each cell snapshotted
(``verifier.snapshot_instances``) instead of asking ``INSTANCES`` of its window at every
poll: at each poll it must hold exactly the query's rows over the same window, a healed
cell's generations included, as segments join the window and leave it."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from ftaudit.eventlog import CellReconfigured
from ftaudit.verifier import coverage
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.online import OnlineVerifier
from tests.support.builder import RunBuilder

Row = tuple[int | None, int | None, str | None, int]


def _queried(ctx: RunContext) -> list[Row]:
    rows = ctx.rows(coverage.INSTANCES, label="test: instances")
    return sorted((r["incarnation"], r["cell"], r["instance"], r["generation"]) for r in rows)


def test_a_followers_instances_are_the_querys_at_every_poll(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[list[Row]] = []
    kept = coverage._instances

    def both(ctx: RunContext, heals: dict[tuple[int, int], list[int]]) -> Iterable[Row]:
        got = sorted(kept(ctx, heals))
        if ctx.following:  # the final verdict asks the query itself
            assert got == _queried(ctx)
            compared.append(got)
        return got

    monkeypatch.setattr(coverage, "_instances", both)
    b = RunBuilder(tmp_path / "run", B=16, cells=2)
    online = OnlineVerifier(tmp_path / "run", select=["FT004"])
    run = b.start()
    for step in range(14):
        if step == 3:  # cell 1 is healed from cell 0, and a second instance appears
            run.driver.log(
                CellReconfigured(
                    step=2,
                    attempt=0,
                    quorum_id=2,
                    heal_source=0,
                    healed_cells=[1],
                    alive_cells=[0, 1],
                )
            )
        instances = ("head",) if step < 3 else ("head", "tail")
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2], instances=instances)
        run.flush()
        online.poll()
    run.finish()
    b.close()
    online.poll()
    healed = [rows for rows in compared if any(r[1] == 1 and r[3] == 1 for r in rows)]
    assert healed, compared  # a healed cell's second generation was kept and compared
    assert any((0, 0, "tail", 0) in rows for rows in compared)  # the cell never healed
    # the window moved past the heal: cell 1's first generation left it with its steps
    before = (0, 1, "head", 0)
    first = next(i for i, rows in enumerate(compared) if before in rows)
    assert any(before not in rows for rows in compared[first:]), compared
