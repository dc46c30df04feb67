"""Arrow columns to and from numpy without pyarrow's pandas shim.

pyarrow converts every Python value it is handed (``pa.array``, ``pa.scalar``, a Python
number in a compute call) and every ``to_numpy`` through a shim that imports pandas on
first use: half a second of CPU, paid by each ``ft-verify`` call that a gate makes after
every step. The readers use these helpers instead; they work on the buffers. And
:func:`unique_sorted` stands in for ``np.unique``, which imports ``numpy.ma`` on first
use (10 ms of every ``ft-verify``) and hashes integers before sorting them (slower).
:func:`list_values` and :func:`list_lengths` read list columns without
``pyarrow.compute`` (``ListArray.flatten`` imports it), whose import alone costs every
``ft-verify`` about 30 ms of CPU.
:func:`concat_ranges` spells runs out in one array.
:func:`consecutive_repeats` lets the writer's flush convert an object logged in several
rows in a row once.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import is_

import numpy as np
import pyarrow as pa


def _valid(array: pa.Array) -> np.ndarray:
    """Which entries of ``array`` are not NULL, from its validity bitmap."""
    n, at = len(array), array.offset
    bits = np.unpackbits(np.frombuffer(array.buffers()[0], np.uint8), bitorder="little")
    return bits[at : at + n].astype(bool)


def null_mask(array: pa.Array) -> np.ndarray:
    """Which entries of ``array`` are NULL (what ``array.is_null()`` gives, without
    importing ``pyarrow.compute``: 0.1 s of a small run's start-up)."""
    if not array.null_count:
        return np.zeros(len(array), dtype=bool)
    return ~_valid(array)


def _offsets(column: pa.ListArray | pa.LargeListArray) -> np.ndarray:
    """The ``len + 1`` offsets of a list column's lists into its child array (of its
    slice: ``column.offsets.to_numpy()`` would go through the pandas shim)."""
    width = np.int64 if pa.types.is_large_list(column.type) else np.int32
    size = np.dtype(width).itemsize
    data = column.buffers()[1]
    return np.frombuffer(data, width, count=len(column) + 1, offset=column.offset * size)


def list_values(column: pa.ListArray | pa.LargeListArray) -> np.ndarray:
    """The values of a list column's lists, in order, as :func:`int64_numpy` gives them
    (of what ``pyarrow.compute.list_flatten`` gives: a NULL list contributes none)."""
    if column.null_count:  # a NULL list may hide values in the child array: compute skips them
        import pyarrow.compute as pc

        return int64_numpy(pc.list_flatten(column))
    offsets = _offsets(column)
    return int64_numpy(column.values.slice(offsets[0], offsets[-1] - offsets[0]))


def list_lengths(column: pa.ListArray | pa.LargeListArray) -> np.ndarray:
    """The length of each list of a list column as ``int64``, 0 for a NULL list (what
    ``pyarrow.compute.list_value_length`` gives with its NULLs as 0)."""
    lengths = np.diff(_offsets(column)).astype(np.int64)
    if column.null_count:
        lengths[~_valid(column)] = 0
    return lengths


def constant_strings(value: str, n: int) -> pa.Array:
    """``n`` copies of ``value`` as a string array (what ``pa.repeat`` would give)."""
    raw = value.encode()
    offsets = np.arange(n + 1, dtype=np.int32) * np.int32(len(raw))
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(raw * n))


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with every column of ``schema``, in its order (NULL where it has none)."""
    n = table.num_rows
    # one dict: `table.column_names` builds a list at each access, and a lookup per field
    # in it cost a 112-column run's load 3-4 ms a segment (a follower's poll, per shape)
    held = dict(zip(table.column_names, table.columns, strict=True))
    columns = [held[f.name] if f.name in held else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def string_array(values: Sequence[str]) -> pa.Array:
    """``values`` as a string array (what ``pa.array(values)`` gives, without the shim)."""
    raw = [v.encode() for v in values]
    offsets = np.cumsum([0, *map(len, raw)], dtype=np.int32)
    return pa.StringArray.from_buffers(len(raw), pa.py_buffer(offsets), pa.py_buffer(b"".join(raw)))


def int64_array(values: np.ndarray, nulls: np.ndarray | None = None) -> pa.Array:
    """A 1-d numpy integer array as an Arrow ``int64`` array (no shim), NULL where the
    boolean ``nulls`` is set (None: nowhere)."""
    data = pa.py_buffer(np.ascontiguousarray(values, dtype=np.int64))
    if nulls is None or not nulls.any():
        return pa.Array.from_buffers(pa.int64(), len(values), [None, data])
    valid = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(pa.int64(), len(values), [valid, data], int(nulls.sum()))


def string_scalar(value: str) -> pa.StringScalar:
    """``value`` as an Arrow scalar, for a compute call (``pc.equal(col, "x")`` converts
    the Python string through the shim)."""
    return constant_strings(value, 1)[0]


def int64_scalar(value: int) -> pa.Int64Scalar:
    """``value`` as an Arrow ``int64`` scalar, for a compute call."""
    data = pa.py_buffer(np.array([value], dtype=np.int64))
    return pa.Array.from_buffers(pa.int64(), 1, [None, data])[0]


def int64_numpy(column: pa.Array | pa.ChunkedArray, *, null: int | None = None) -> np.ndarray:
    """An integer or boolean column as an ``int64`` numpy array (a copy); NULLs become
    ``null``. Raises ``ValueError`` for a NULL when ``null`` is None."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = []
    for chunk in chunks:
        if chunk.null_count and null is None:
            raise ValueError(f"a {chunk.type} column holds {chunk.null_count} NULL(s)")
        if chunk.type != pa.int64():
            chunk = chunk.cast(pa.int64())
        data = chunk.buffers()[1]
        values = np.frombuffer(data, np.int64, count=len(chunk), offset=chunk.offset * 8).copy()
        if chunk.null_count:
            values[~_valid(chunk)] = null
        parts.append(values)
    # one chunk (a record batch's column): no second copy
    return parts[0] if len(parts) == 1 else np.concatenate(parts or [np.empty(0, np.int64)])


def consecutive_repeats(values: list) -> tuple[list, np.ndarray] | None:
    """``values`` as the first of each run of one object repeated in a row (the same object,
    not an equal one) and the index of each value's run; None when fewer than a quarter of
    them repeat the one before, so that converting each run once would not pay."""
    n = len(values)
    if n < 4:
        return None
    # identity tests in C: equality could call a model's Python-level __eq__
    same = np.fromiter(map(is_, values[1:], values[:-1]), dtype=np.bool_, count=n - 1)
    if int(same.sum()) * 4 < n:
        return None
    new = np.concatenate(([True], ~same))
    heads = np.flatnonzero(new).tolist()
    return list(map(values.__getitem__, heads)), np.cumsum(new) - 1


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + n) for s, n in zip(starts, lengths))`` as one ``int64`` array.

    Written as one array and a running sum in place: ``repeat(...) + arange(total)``
    touches three arrays of the result's size, and fresh memory is what costs here (on
    FT008's 8 M samples fed twice: 31,500 page faults a call against 15,750).
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.ones(int(lengths.sum()), dtype=np.int64)
    if not out.size:
        return out
    kept = lengths > 0
    s, n = starts[kept], lengths[kept]
    # each run's first value, less the value the run before it would go on with
    jump = s.copy()
    jump[1:] -= s[:-1] + n[:-1] - 1
    out[np.cumsum(n) - n] = jump
    return np.cumsum(out, out=out)


def unique_sorted(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-d integer array, ascending (what ``np.unique`` gives);
    ``values`` itself when it is strictly ascending already."""
    if values.size < 2 or bool(np.all(values[1:] > values[:-1])):
        return values
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def in_sorted(values: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Which of ``values`` are in ``members`` (distinct, ascending: :func:`unique_sorted`);
    what ``np.isin`` gives, which imports ``numpy.ma`` on some paths (10 ms of CPU)."""
    if not members.size:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(members, values), members.size - 1)
    return members[at] == values


__all__ = [
    "conform",
    "consecutive_repeats",
    "constant_strings",
    "in_sorted",
    "int64_numpy",
    "int64_scalar",
    "string_scalar",
    "unique_sorted",
]
