"""The verifier's ring arithmetic is a deliberate copy of the writers' (``eventlog/ring.py``):
independent code, equal results. A change to one that is not made to the other fails here."""

from __future__ import annotations

import pytest

from ftaudit.eventlog import ring as writers
from ftaudit.verifier import ring as verifier


@pytest.mark.parametrize("B", [1, 2, 3, 7, 10, 64, 100, 1000, 4097])
def test_the_two_statements_agree(B: int) -> None:
    assert verifier.KEEP_FRACTION == writers.KEEP_FRACTION
    assert verifier.keep_size(B) == writers.keep_size(B)
    assert verifier.max_per_step(B) == writers.max_ids_per_step(B)
    for counter in [*range(0, 3 * B + 2), 10 * B + 1]:
        start, count = writers.stale_arc(counter, B)
        expected = list(range(start, start + count))
        assert [i % B for i in expected] == verifier.stale_runs(counter, B).to_list(), counter
