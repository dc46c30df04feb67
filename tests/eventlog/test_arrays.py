"""The pandas-free Arrow <-> numpy helpers agree with pyarrow's own conversions, and
``unique_sorted`` with ``np.unique``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from ftaudit.eventlog.arrays import constant_strings, int64_numpy, unique_sorted


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
