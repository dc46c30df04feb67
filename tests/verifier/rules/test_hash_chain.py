"""FT001's hash chain: where a recorded head's sequence number falls among a writer's
segments, by search, against the plain definition."""

from __future__ import annotations

import random

import pytest

from ftaudit.verifier.rules.log_integrity.hash_chain import inside_a_segment


@pytest.mark.parametrize("seed", range(30))
def test_inside_a_segment_is_first_at_or_before_and_last_after(seed: int) -> None:
    rng = random.Random(seed)
    # segments of two writers: one-flush ones, merged ones, and a merged one left beside
    # the segments it holds (a compaction cut short), so ranges may nest and overlap
    ranges: dict[str, list[tuple[int, int]]] = {}
    for writer in ("driver.i0", "trainer-c0-r0.i0"):
        starts = sorted(rng.sample(range(300), 25))
        spans = [(a, a + rng.randrange(0, 20)) for a in starts]
        spans += [(a, a + rng.randrange(20, 60)) for a in rng.sample(starts, 3)]
        rng.shuffle(spans)
        ranges[writer] = spans
    inside = inside_a_segment(ranges)
    for writer in (*ranges, "unknown-writer"):
        for seq in range(-2, 380):
            want = any(a <= seq < b for a, b in ranges.get(writer, ()))
            assert inside(writer, seq) == want, (writer, seq)
