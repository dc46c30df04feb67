"""Span set algebra agrees with Python sets (hypothesis), and ring wrapping is right."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ftaudit.eventlog import IntRuns
from ftaudit.verifier import spans
from ftaudit.verifier.spans import Spans, multiply_covered

id_sets = st.sets(st.integers(min_value=0, max_value=60), max_size=40)


def _set(s: Spans) -> set[int]:
    return set(s.to_array().tolist())


@settings(max_examples=150, deadline=None)
@given(id_sets, id_sets)
def test_algebra_matches_python_sets(a: set[int], b: set[int]) -> None:
    x, y = Spans.from_ids(sorted(a)), Spans.from_ids(sorted(b))
    assert _set(x | y) == a | b
    assert _set(x & y) == a & b
    assert _set(x - y) == a - b
    assert len(x) == len(a)
    assert (x == y) == (a == b)


one_span = st.tuples(st.integers(min_value=0, max_value=20), st.integers(min_value=1, max_value=8))


@settings(max_examples=150, deadline=None)
@given(one_span, one_span)
def test_two_single_spans_combine_as_sets(a: tuple[int, int], b: tuple[int, int]) -> None:
    """One span each (FT003's clean positions and an attempt's fresh ones): apart,
    touching, overlapping or nested, in either order."""
    x, y = Spans.of([a[0]], [a[0] + a[1]]), Spans.of([b[0]], [b[0] + b[1]])
    u = set(range(a[0], a[0] + a[1])) | set(range(b[0], b[0] + b[1]))
    for joined in (x | y, y | x):
        assert _set(joined) == u
        assert joined == Spans.from_ids(sorted(u))


@settings(max_examples=150, deadline=None)
@given(id_sets, st.integers(min_value=-3, max_value=64), st.integers(min_value=-3, max_value=64))
def test_covers_is_range_inclusion(a: set[int], lo: int, hi: int) -> None:
    """What FT003's budget check asks before any set algebra (a range inside the clean
    positions), against Python sets."""
    assert Spans.from_ids(sorted(a)).covers(lo, hi) == (set(range(lo, hi)) <= a)


few_spans = st.sets(st.integers(min_value=0, max_value=14), max_size=8)


@settings(max_examples=150, deadline=None)
@given(few_spans, few_spans)
def test_few_spans_combine_as_numpy_does(a: set[int], b: set[int]) -> None:
    """The Python path for few spans gives the numpy path's canonical arrays, exactly."""
    x, y = Spans.from_ids(sorted(a)), Spans.from_ids(sorted(b))
    for op in (Spans.__or__, Spans.__and__, Spans.__sub__):
        small = op(x, y)
        saved, spans.SMALL = spans.SMALL, -1
        try:
            large = op(x, y)
        finally:
            spans.SMALL = saved
        assert small == large
        assert small.starts.dtype == large.starts.dtype == np.int64


raw_spans = st.lists(
    st.tuples(st.integers(min_value=-5, max_value=30), st.integers(min_value=-5, max_value=30)),
    max_size=9,
)


@settings(max_examples=200, deadline=None)
@given(raw_spans)
def test_few_spans_normalise_as_numpy_does(pairs: list[tuple[int, int]]) -> None:
    """``Spans.of`` on a few unsorted, overlapping, touching or empty spans: the Python
    path's canonical arrays are the numpy path's, and hold the members of the spans."""
    starts = np.asarray([s for s, _ in pairs], dtype=np.int64)
    ends = np.asarray([e for _, e in pairs], dtype=np.int64)
    small = Spans.of(starts, ends)
    saved, spans.SMALL = spans.SMALL, -1
    try:
        large = Spans.of(starts, ends)
    finally:
        spans.SMALL = saved
    assert small == large
    assert small.starts.dtype == small.ends.dtype == np.int64
    assert _set(small) == {i for s, e in pairs for i in range(s, e)}


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 50), st.integers(0, 12), st.integers(1, 12))
def test_modulo_matches_ring_arithmetic(start: int, count: int, ring: int) -> None:
    spans = Spans.of([start], [start + count])
    assert _set(spans.modulo(ring)) == {p % ring for p in range(start, start + count)}


@settings(max_examples=150, deadline=None)
@given(st.sets(st.integers(min_value=0, max_value=80), max_size=30), st.integers(1, 25))
def test_modulo_of_several_spans_is_ring_arithmetic_on_either_path(
    members: set[int], ring: int
) -> None:
    x = Spans.from_ids(sorted(members))
    small = x.modulo(ring)
    saved, spans.SMALL = spans.SMALL, -1
    try:
        large = x.modulo(ring)
    finally:
        spans.SMALL = saved
    assert small == large
    assert _set(small) == {p % ring for p in members}


def test_from_runs_keeps_only_members() -> None:
    runs = IntRuns.arc(8, 4, 10)  # 8, 9, 0, 1
    assert _set(Spans.from_runs(runs)) == {8, 9, 0, 1}
    assert Spans.from_runs(runs).describe() == "[0..1, 8..9]"


def test_multiply_covered() -> None:
    starts = np.array([0, 5, 8], dtype=np.int64)
    ends = np.array([6, 9, 10], dtype=np.int64)
    assert _set(multiply_covered(starts, ends)) == {5, 8}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=4),
            st.integers(min_value=-5, max_value=60),
            st.integers(min_value=-2, max_value=9),
        ),
        max_size=30,
    )
)
def test_grouped_spans_are_each_groups_canonical_spans(runs: list[tuple[int, int, int]]) -> None:
    groups = np.asarray([g for g, _, _ in runs], dtype=np.int64)
    starts = np.asarray([s for _, s, _ in runs], dtype=np.int64)
    ends = starts + np.asarray([n for _, _, n in runs], dtype=np.int64)
    found = spans.grouped_spans(groups, starts, ends)
    assert found is not None
    group, start, end = found
    for g in range(5):
        want = Spans.of(starts[groups == g], ends[groups == g])
        mine = group == g
        assert start[mine].tolist() == want.starts.tolist()
        assert end[mine].tolist() == want.ends.tolist()
    assert set(group.tolist()) <= set(groups.tolist())


def test_grouped_spans_decline_a_range_too_wide_to_shift() -> None:
    wide = np.asarray([0, 1 << 61], dtype=np.int64)
    assert spans.grouped_spans(np.asarray([0, 3]), wide, wide + 1) is None


row_sets = st.lists(st.tuples(id_sets, id_sets), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(row_sets, st.integers(min_value=-5, max_value=5))
def test_bands_answer_for_every_row_as_row_by_row_algebra(
    rows: list[tuple[set[int], set[int]]], low: int
) -> None:
    """Laid side by side, each row's difference is the row-by-row one; members outside a
    row's band leave that row out instead of reaching into another row."""
    bands = spans.Bands(low, 61 - low + 1)  # members in [low, 61)
    firsts = [Spans.from_ids(sorted(a)) for a, _ in rows]
    seconds = [
        Spans.from_ids(sorted(b | ({low - 1} if k % 3 == 2 else set())))
        for k, (_, b) in enumerate(rows)
    ]
    a, a_fit = bands.lay(firsts)
    b, b_fit = bands.lay(seconds)
    assert a_fit.tolist() == [not s or s.starts[0] >= low for s in firsts]
    assert b_fit.tolist() == [not s or s.starts[0] >= low for s in seconds]
    both = a_fit & b_fit
    differ = set(bands.rows_of(a - b).tolist())
    expected = {k for k, (x, y) in enumerate(zip(firsts, seconds, strict=True)) if x - y}
    assert {k for k in differ if both[k]} == {k for k in expected if both[k]}
    assert bands.fits(len(rows)) and not spans.Bands(0, 1 << 61).fits(2)
