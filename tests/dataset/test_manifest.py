"""Manifests round-trip through Parquet, stream in chunks, and refuse damaged files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import Dataset

from ftaudit.dataset import (
    DatasetManifest,
    ManifestError,
    build_manifest,
    find_manifest,
    fingerprint,
    read_manifest,
    write_manifest,
    write_manifest_of,
)
from ftaudit.eventlog.rundir import manifest_path

pytestmark = pytest.mark.torch


class Windows(Dataset):
    """A map-style torch Dataset: item i is a window of token ids."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.arange(i, i + 5)


def test_round_trip(tmp_path: Path) -> None:
    manifest = build_manifest(Windows(), description="windows")
    assert manifest.size == 10
    assert manifest.fingerprints[3] == fingerprint(np.arange(3, 8))
    back = read_manifest(write_manifest(manifest, tmp_path / "m.parquet"))
    assert back.digest == manifest.digest and back.source == "windows"
    assert np.array_equal(back.fingerprints, manifest.fingerprints)
    # any Parquet tool reads it
    table = pq.read_table(tmp_path / "m.parquet")
    assert table.column("item").to_pylist() == list(range(10))


def test_streamed_in_chunks_equals_in_memory(tmp_path: Path) -> None:
    seen: list[tuple[int, int | None]] = []
    written = write_manifest_of(
        Windows(), tmp_path / "s.parquet", chunk_size=3, progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(3, 10), (6, 10), (9, 10), (10, 10)]
    assert written.digest == build_manifest(Windows()).digest and written.size == 10
    assert pq.ParquetFile(written.path).num_row_groups == 4
    assert read_manifest(written.path).digest == written.digest


def test_sources_map_style_iterable_and_fields() -> None:
    rows = [np.arange(i, i + 5) for i in range(10)]
    expected = build_manifest(Windows()).digest
    assert build_manifest(rows).digest == expected  # a list is map-style
    assert build_manifest(iter(rows)).digest == expected  # a stable iterable
    records = [{"input_ids": r.tolist(), "text": "x"} for r in rows]  # Hugging Face style
    assert build_manifest(records, field="input_ids").digest == expected
    with pytest.raises(KeyError, match="no field 'ids'"):
        build_manifest(records, field="ids")


def test_digest_depends_on_content_and_order() -> None:
    a = DatasetManifest.of([1, 2, 3])
    assert a.digest == DatasetManifest.of(np.array([1, 2, 3])).digest
    assert a.digest != DatasetManifest.of([1, 3, 2]).digest
    assert a.digest != DatasetManifest.of([1, 2]).digest
    assert a.items_with([2, 7]) == {2: [1], 7: []}


def test_find_by_digest_in_run_or_outside(tmp_path: Path) -> None:
    manifest = DatasetManifest.of([5, 6, 7])
    outside = write_manifest(manifest, tmp_path / "elsewhere.parquet")
    run = tmp_path / "run"
    assert find_manifest(run, manifest.digest) is None
    assert find_manifest(run, manifest.digest, [outside]).digest == manifest.digest
    write_manifest(manifest, manifest_path(run, manifest.digest))
    assert find_manifest(run, manifest.digest).size == 3
    assert find_manifest(run, DatasetManifest.of([1]).digest, [outside]) is None


def test_damaged_files_are_refused_with_their_name(tmp_path: Path) -> None:
    good = write_manifest(DatasetManifest.of([1, 2, 3]), tmp_path / "good.parquet")
    with pytest.raises(ManifestError, match="no such manifest file"):
        read_manifest(tmp_path / "missing.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(ManifestError, match=r"junk\.parquet: not a readable"):
        read_manifest(tmp_path / "junk.parquet")
    pq.write_table(pa.table({"item": [0]}), tmp_path / "foreign.parquet")
    with pytest.raises(ManifestError, match="not an ftaudit manifest"):
        read_manifest(tmp_path / "foreign.parquet")
    table = pq.read_table(good)
    edited = table.set_column(1, "fingerprint", pa.array([1, 2, 4], pa.int64()))
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), tmp_path / "e.parquet")
    meta = pq.ParquetFile(good).metadata.metadata
    with pq.ParquetWriter(tmp_path / "e.parquet", edited.schema) as w:
        w.write_table(edited)
        w.add_key_value_metadata({k.decode(): v.decode() for k, v in meta.items()})
    with pytest.raises(ManifestError, match="do not match the recorded digest"):
        read_manifest(tmp_path / "e.parquet")
