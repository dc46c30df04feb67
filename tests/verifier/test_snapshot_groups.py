"""``snapshot_groups`` reads its groups from Arrow buffers as the rows' Python values say.

It takes a row's id runs as they are when already canonical and makes one members tuple
per distinct list; both must give what converting each row's Python value gives, also
for runs that are not canonical, a NULL rank (a snapshot the driver logged) and members
that differ only in an instance's name.
"""

from __future__ import annotations

from pathlib import Path

from ftaudit.eventlog import IntRuns, WitnessSnapshot
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.coverage import SNAPSHOT_GROUPS, snapshot_groups
from ftaudit.verifier.session import Session
from ftaudit.verifier.spans import Spans
from tests.support.builder import HEAD, TAIL, RunBuilder


def _write(root: Path) -> None:
    b = RunBuilder(root, B=16, cells=2)
    try:
        run = b.start()
        for step in range(4):
            run.train(step, [2 * step, 2 * step + 1], instances=(HEAD, TAIL))
        ids = run.alloc(4, [8, 9])
        for cell in (0, 1):
            run.snapshot(4, [0, 1, *ids], cell=cell, instance=HEAD if cell else TAIL)
        # runs out of order, touching and overlapping; one snapshot logged by the driver
        odd = IntRuns(starts=[9, 0, 3, 2], lengths=[1, 3, 2, 2])
        stale = IntRuns(starts=[12, 11], lengths=[2, 1])
        for writer in (run.trainer(1), run.driver):
            writer.log(
                WitnessSnapshot(
                    step=4,
                    attempt=0,
                    cell=1,
                    instance="chunk1.head",
                    nonzero_ids=odd,
                    stale_ids=stale,
                )
            )
        run.step_end(4)
        ids = run.alloc(5, [10, 11])
        for cell in (0, 1):  # step 4's members with the instance names swapped
            run.snapshot(5, [0, 1, *ids], cell=cell, instance=TAIL if cell else HEAD)
        run.step_end(5)
        run.finish()
    finally:
        b.close()


def test_groups_are_what_each_rows_python_values_give(tmp_path: Path) -> None:
    _write(tmp_path / "run")
    with Session.open(tmp_path / "run") as session:
        ctx = RunContext(session)
        groups = snapshot_groups(ctx)
        expected = [
            (
                (r["incarnation"], r["step"], r["attempt"]),
                Spans.from_column(r["nonzero_ids"]),
                Spans.from_column(r["stale_ids"]),
                tuple(zip(r["cells"], r["ranks"], r["instances"], strict=True)),
                r["segment"],
            )
            for r in session.query(SNAPSHOT_GROUPS, [0]).to_pylist()
        ]
    got = [(g.key, g.nonzero, g.stale, g.members, g.segment) for gs in groups.values() for g in gs]
    assert sorted(map(repr, got)) == sorted(map(repr, expected))
    assert len(got) == len(expected) == 7
    assert any(None in (m[1] for m in members) for _, _, _, members, _ in got)
    four, odd = sorted(groups[(0, 4, 0)], key=lambda g: g.members[-1][2])
    (five,) = groups[(0, 5, 0)]
    assert [m[2] for m in four.members] == [TAIL, HEAD]
    assert [m[2] for m in five.members] == [HEAD, TAIL]
    assert [m[2] for m in odd.members] == ["chunk1.head"] * 2
    assert odd.nonzero == Spans.of([0, 9], [5, 10])
