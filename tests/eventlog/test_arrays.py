"""The pandas-free Arrow <-> numpy helpers agree with pyarrow's own conversions (the list
helpers with ``pyarrow.compute``'s), ``unique_sorted`` with ``np.unique``,
``concat_ranges`` with concatenated ``np.arange``, ``in_sorted`` with ``np.isin``, and a
column converted once per run of repeats with the same column converted value by value."""

from __future__ import annotations

import copy
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from ftaudit.eventlog import IntRuns
from ftaudit.eventlog.arrays import (
    concat_ranges,
    consecutive_repeats,
    constant_strings,
    in_sorted,
    int64_numpy,
    list_lengths,
    list_values,
    unique_sorted,
)
from ftaudit.eventlog.arrow_schema import to_arrow


@pytest.mark.parametrize(("value", "n"), [("abc", 5), ("", 3), ("x", 0), ("é", 2)])
def test_constant_strings_is_a_repeat(value: str, n: int) -> None:
    assert constant_strings(value, n).equals(pa.array([value] * n, pa.string()))


def test_int64_numpy_over_chunks_slices_types_and_nulls() -> None:
    column = pa.chunked_array([pa.array([1, None, 3]), pa.array([4, 5, 6]).slice(1)])
    assert int64_numpy(column, null=0).tolist() == [1, 0, 3, 5, 6]
    assert int64_numpy(pa.array([7, 8, 9], pa.int32()).slice(1)).tolist() == [8, 9]
    bools = pa.chunked_array([pa.array([True, None, False])])
    assert int64_numpy(bools, null=0).astype(bool).tolist() == [True, False, False]
    empty = int64_numpy(pa.chunked_array([], pa.int32()))
    assert empty.dtype == np.int64 and empty.size == 0
    with pytest.raises(ValueError, match="NULL"):
        int64_numpy(column)


@pytest.mark.parametrize(
    "values",
    [[], [5], [3, 1, 2], [1, 2, 3], [4, 4, 4], [2, -1, 2, 7, -1, 0], [1, 1, 2, 3, 5, 8]],
)
def test_unique_sorted_is_np_unique(values: list[int]) -> None:
    arr = np.asarray(values, dtype=np.int64)
    found = unique_sorted(arr)
    assert found.dtype == np.int64 and found.tolist() == np.unique(arr).tolist()


@pytest.mark.parametrize(
    ("starts", "lengths"),
    [
        ([], []),
        ([5], [0]),
        ([0, 0], [0, 0]),
        ([3, -2, 10], [2, 0, 3]),
        ([7, 7, 7], [1, 2, 3]),
        ([-5, 100, 0, 2**40], [4, 1, 0, 2]),
    ],
)
def test_concat_ranges_is_concatenated_aranges(starts: list[int], lengths: list[int]) -> None:
    want = [v for s, n in zip(starts, lengths, strict=True) for v in range(s, s + n)]
    got = concat_ranges(np.asarray(starts, dtype=np.int64), np.asarray(lengths, dtype=np.int64))
    assert got.dtype == np.int64
    assert got.tolist() == want


def test_concat_ranges_agrees_on_many_runs() -> None:
    rng = np.random.default_rng(7)
    starts = rng.integers(-(10**9), 10**9, 500)
    lengths = rng.integers(0, 50, 500)
    want = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths, strict=True)])
    assert np.array_equal(concat_ranges(starts, lengths), want)


def test_consecutive_repeats_are_runs_of_one_object() -> None:
    a, b = [1, 2], [1, 2]  # equal, not the same: two runs
    heads, index = consecutive_repeats([a, a, b, b, b, None, None, a])  # type: ignore[misc]
    assert [id(h) for h in heads] == [id(a), id(b), id(None), id(a)]
    assert index.tolist() == [0, 0, 1, 1, 1, 2, 2, 3]
    assert consecutive_repeats([a, b, a, b, a, b, a, a]) is None  # 1 of 8 repeats: not worth it
    assert consecutive_repeats([a, a, a]) is None  # too few to pay


@pytest.mark.parametrize("shared", [True, False])
def test_repeated_composites_convert_as_copies_do(shared: bool) -> None:
    """A column of id-run sets, maps and Nones, many repeated in a row, gives the array
    its distinct copies give (the path without repeats)."""
    runs = [IntRuns.arc(0, 3, 8), IntRuns.arc(6, 4, 8), IntRuns()]
    maps = [{"a": 1.0, "b": 2.5}, {}, {"c": -0.0}]
    order = [0, 0, 0, 1, 1, 2, 2, 2, 0, 1, 1, 1]
    for values, annotation in (
        ([runs[i] if i < 2 else None for i in order], IntRuns | None),
        ([maps[i] for i in order], dict[str, float]),
        ([runs[i] for i in order], IntRuns),
    ):
        copies = [copy.deepcopy(v) for v in values]
        column = values if shared else copies
        assert (consecutive_repeats(column) is not None) == shared
        assert to_arrow(column, annotation).equals(to_arrow(copies, annotation))
        assert to_arrow(column, annotation).to_pylist() == [
            None if v is None else (vars(v) if isinstance(v, IntRuns) else list(v.items()))
            for v in values
        ]


@pytest.mark.parametrize(
    ("values", "members"),
    [
        ([], []),
        ([1, 2], []),
        ([], [3]),
        ([5, -1, 9, 5, 0], [-1, 5]),
        ([10, 11, 12], [1, 2, 3]),
        ([0, 1, 2, 3, 4], [4]),
        ([7, 7, 8], [-9, 7, 8, 100]),
    ],
)
def test_in_sorted_is_np_isin(values: list[int], members: list[int]) -> None:
    arr, sorted_set = (np.asarray(v, dtype=np.int64) for v in (values, members))
    found = in_sorted(arr, sorted_set)
    assert found.dtype == bool and found.tolist() == np.isin(arr, sorted_set).tolist()


def test_looking_items_up_in_a_manifest_imports_no_numpy_ma() -> None:
    # FT008 does it on a failing run: numpy.ma is 10 ms of a gate's start-up
    code = (
        "import sys\n"
        "from ftaudit.dataset.manifest import DatasetManifest\n"
        "assert DatasetManifest.of([5, 3, 5]).items_with([5, 4, 5]) == {4: [], 5: [0, 2]}\n"
        # np.isin sorts (np.unique: numpy.ma) when many fingerprints are looked up
        "fps = [(i * 0x9E3779B97F4A7C15) % 2**63 for i in range(1000)]\n"
        "found = DatasetManifest.of(fps).items_with(fps[:100] + [-1])\n"
        "assert found == {**{f: [i] for i, f in enumerate(fps[:100])}, -1: []}\n"
        "assert 'numpy.ma' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


LISTS = [[1, 2], None, [], [3], None, [4, 5, 6], []]


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize(("start", "stop"), [(0, 7), (1, 5), (3, 7), (2, 2), (0, 0)])
def test_list_helpers_are_the_compute_kernels(large: bool, start: int, stop: int) -> None:
    import pyarrow.compute as pc

    kind = pa.large_list(pa.int64()) if large else pa.list_(pa.int64())
    for lists in (LISTS, [v for v in LISTS if v is not None]):
        column = pa.array(lists, kind).slice(start, stop - start)
        flat = pc.list_flatten(column)
        assert list_values(column).tolist() == flat.to_pylist()
        lengths = pc.list_value_length(column).to_pylist()
        assert list_lengths(column).tolist() == [n or 0 for n in lengths]
        assert list_values(column).dtype == list_lengths(column).dtype == np.int64
