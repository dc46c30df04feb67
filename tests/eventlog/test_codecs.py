"""A segment's columns are compressed by size: zstd for large ones, lz4 for small ones, and
every Parquet leaf gets a codec (a path Parquet names otherwise would be written
uncompressed: pyarrow ignores a codec for a path it does not have)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.codecs import ZSTD_FROM_BYTES, column_codecs, compression, leaf_paths
from ftaudit.eventlog.envelope import ENVELOPE_SCHEMA
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.segment import DIGEST_KEY, DIGEST_PLACEHOLDER, write_atomically


def _parquet_paths(schema: pa.Schema, tmp_path: Path) -> list[str]:
    path = tmp_path / "empty.parquet"
    pq.write_table(schema.empty_table(), path)
    md = pq.read_metadata(path)
    return [md.schema.column(i).path for i in range(md.num_columns)]


def test_leaf_paths_are_parquets_for_every_registered_column(tmp_path: Path) -> None:
    fields = [*ENVELOPE_SCHEMA, *(f for t in default_registry for f in t.arrow_fields)]
    schema = pa.schema(fields)
    ours = [p for f in schema for p in leaf_paths(f.name, f.type)]
    assert ours == _parquet_paths(schema, tmp_path)
    nested = [f for f in fields if pa.types.is_nested(f.type)]
    assert {type(f.type) for f in nested} >= {pa.StructType, pa.ListType, pa.MapType}


def test_leaf_paths_are_parquets_for_every_nesting(tmp_path: Path) -> None:
    point = pa.struct([("x", pa.int64()), ("tags", pa.list_(pa.string()))])
    schema = pa.schema(
        [
            ("a.b", pa.int64()),  # a dot in a column name, as every payload column has
            ("runs", pa.struct([("starts", pa.list_(pa.int64())), ("n", pa.int32())])),
            ("big", pa.large_list(pa.float64())),
            ("fixed", pa.list_(pa.int8(), 3)),
            ("by_name", pa.map_(pa.string(), pa.map_(pa.int64(), point))),
            ("points", pa.list_(point)),
        ]
    )
    ours = [p for f in schema for p in leaf_paths(f.name, f.type)]
    assert ours == _parquet_paths(schema, tmp_path)


def test_a_segment_compresses_its_large_columns_with_zstd_and_the_rest_with_lz4(
    tmp_path: Path,
) -> None:
    n = ZSTD_FROM_BYTES // 8 + 1  # an int64 column just over the threshold
    runs = pa.array([{"starts": [i], "lengths": [1]} for i in range(n)])
    table = pa.table(
        {
            "large": pa.array(range(n), pa.int64()),
            "small": pa.array([1] * n, pa.int8()),
            "runs": runs,
        },
        metadata={DIGEST_KEY: DIGEST_PLACEHOLDER},
    )
    assert column_codecs(table) == {
        "large": "zstd",
        "small": "lz4",  # n bytes: under the threshold
        "runs.starts.list.element": "zstd",  # the struct's size decides for each leaf
        "runs.lengths.list.element": "zstd",
    }
    path = tmp_path / "segment.parquet"
    write_atomically(table, path, fsync=False)
    md = pq.read_metadata(path)
    written = {md.schema.column(i).path: md.row_group(0).column(i).compression for i in range(4)}
    assert written == {
        "large": "ZSTD",
        "small": "LZ4",
        "runs.starts.list.element": "ZSTD",
        "runs.lengths.list.element": "ZSTD",
    }
    assert pq.read_table(path).replace_schema_metadata(None) == table.replace_schema_metadata(None)


def test_a_table_whose_columns_all_get_one_codec_names_that_codec() -> None:
    large = pa.table({"a": pa.array(range(ZSTD_FROM_BYTES), pa.int64())})
    small = pa.table({"a": pa.array([1, 2], pa.int64()), "b": ["x", "y"]})
    mixed = pa.table(
        {"a": pa.array(range(ZSTD_FROM_BYTES), pa.int64()), "b": [True] * ZSTD_FROM_BYTES}
    )
    assert compression(large) == "zstd"
    assert compression(small) == "lz4"
    assert compression(mixed) == {"a": "zstd", "b": "lz4"}  # a bool a bit: 2 KiB
