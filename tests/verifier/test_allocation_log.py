"""The logged allocations as the rules see them: each allocation once, however often logged.

``AllocationLog`` merges rows equal in every logged field (as a ``GROUP BY`` over them
would): a row logged again is the same allocation, kept with its first sequence number;
a row whose id sets differ is another one, however alike its other fields.
"""

from __future__ import annotations

from pathlib import Path

from ftaudit.eventlog import IntRuns
from ftaudit.eventlog.events import WitnessAllocated
from ftaudit.verifier.context import RunContext
from ftaudit.verifier.session import Session
from tests.support.builder import RunBuilder


def _allocated(step: int, witness_start: int) -> WitnessAllocated:
    return WitnessAllocated(
        step=step,
        attempt=0,
        num_ids=3,
        counter_after=3 * (step + 1),
        witness_ids=IntRuns.arc(witness_start, 3, 20),
        sample_indices=IntRuns.arc(3 * step, 3, 1 << 20),
        stale_ids=IntRuns(),
    )


def test_an_allocation_logged_twice_counts_once_and_one_with_other_ids_does_not(
    tmp_path: Path,
) -> None:
    b = RunBuilder(tmp_path / "run", B=20)
    run = b.start()
    seqs = [
        run.driver.log(_allocated(0, 0)),
        run.driver.log(_allocated(0, 0)),  # the same allocation again
        run.driver.log(_allocated(0, 7)),  # every scalar field alike, other ids
        run.driver.log(_allocated(1, 3)),
    ]
    run.finish()
    b.close()
    with Session.open(b.root) as session:
        found = RunContext(session).allocations
    assert [(a.step, a.witness_ids.starts, a.seq) for a in found] == [
        (0, [0], seqs[0]),  # the first time it was logged
        (0, [7], seqs[2]),
        (1, [3], seqs[3]),
    ]
    assert [a.index for a in found] == [0, 1, 2]
