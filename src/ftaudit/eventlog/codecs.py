"""Which compression each column of a segment gets: zstd where it pays, lz4 elsewhere.

zstd sets up a decompression context for every column chunk it decodes: about 17 us a
chunk, so a small flush of 50 columns pays 0.8 ms to read whatever it holds (1.2 ms
against lz4's 0.4 ms for a trainer's 5 steps), and as much again to write. Its smaller
files come from large columns only: on a column of a few KiB, lz4 writes the same bytes.
So a column gets zstd when its Arrow data reaches :data:`ZSTD_FROM_BYTES`, and lz4
otherwise: a small flush (a follower reads one a writer every few steps) costs a third
as much to decode and half as much to encode at the same size, while a full flush or a
roll's merged segment, whose columns are large, is compressed as before.
(``benchmarks/eventlog_bench.py`` measures each choice on its events.)
"""

from __future__ import annotations

import pyarrow as pa

ZSTD_FROM_BYTES = 16 * 1024
"""A column with this much Arrow data or more is compressed with zstd, a smaller one with
lz4: on synth trainer flushes of 35, 175 and 700 rows the files came out 0.2%, 1.7% and
4% larger than all-zstd ones, and decoded 2.6x, 2.2x and 1.6x faster."""


def leaf_paths(name: str, typ: pa.DataType) -> list[str]:
    """The Parquet column paths of an Arrow column (the leaves a codec is set for), as
    pyarrow names them: a struct's fields under it, a list's items as ``list.element``
    and a map's as ``key_value.key`` and ``key_value.value``."""
    if pa.types.is_struct(typ):
        return [p for f in typ for p in leaf_paths(f"{name}.{f.name}", f.type)]
    if pa.types.is_map(typ):
        return [
            *leaf_paths(f"{name}.key_value.key", typ.key_type),
            *leaf_paths(f"{name}.key_value.value", typ.item_type),
        ]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return leaf_paths(f"{name}.list.element", typ.value_type)
    return [name]


def compression(table: pa.Table) -> str | dict[str, str]:
    """``write_table``'s ``compression`` for ``table``: one codec's name when every column
    gets it (a full flush, a merged segment: the path pyarrow takes for one codec, which
    encoded the writer benchmark's flushes 3% faster than a map naming the same codec
    for every column), else :func:`column_codecs`."""
    codecs = column_codecs(table)
    used = set(codecs.values())
    return used.pop() if len(used) == 1 else codecs


def column_codecs(table: pa.Table) -> dict[str, str]:
    """The codec of each Parquet column of ``table``.

    A column's size is that of its buffers (``get_total_buffer_size``: a slice counts its
    whole buffers, so it may get zstd where lz4 would do), not ``nbytes``, which releases
    the GIL: in the writer's flusher each call then waited for the logging thread's
    switch interval, 21 ms a flush of 25 columns, and the flusher fell behind.
    """
    return {
        path: "zstd" if column.get_total_buffer_size() >= ZSTD_FROM_BYTES else "lz4"
        for field, column in zip(table.schema, table.columns, strict=True)
        for path in leaf_paths(field.name, field.type)
    }


__all__ = ["ZSTD_FROM_BYTES", "column_codecs", "compression", "leaf_paths"]
