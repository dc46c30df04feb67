"""Manifests of real Hugging Face ``datasets.Dataset`` objects (datasets 5.2.0), built in
process from a dict: no network, no cache directory.

A Hugging Face row is a dict of columns; its values are Python lists, numpy arrays or
torch tensors by the dataset's format. The manifest is read a chunk per
``__getitems__`` call (torch's batched-fetch protocol, ``datasets/arrow_dataset.py``
``Dataset.__getitems__``) and must equal the one read ``ds[i]`` by ``ds[i]``, in every
format, for every column shape.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

datasets = pytest.importorskip("datasets")
torch = pytest.importorskip("torch")

from torch.utils.data import Subset  # noqa: E402

from ftaudit.dataset import build_manifest, fingerprint, read_manifest, write_manifest_of  # noqa: E402

pytestmark = pytest.mark.torch

N, SEQ = 23, 5
FORMATS = [None, "numpy", "torch"]


def corpus() -> datasets.Dataset:
    """Token rows of equal length, ragged rows, a float matrix per item, a label and text."""
    rng = np.random.default_rng(4)
    features = datasets.Features(
        {
            "input_ids": datasets.List(datasets.Value("int32")),
            "ragged": datasets.List(datasets.Value("int64")),
            "pixels": datasets.Array2D((2, 3), "float32"),
            "label": datasets.Value("int64"),
            "text": datasets.Value("string"),
        }
    )
    return datasets.Dataset.from_dict(
        {
            "input_ids": rng.integers(0, 1000, (N, SEQ)).tolist(),
            "ragged": [list(range(i % 4 + 1)) for i in range(N)],
            "pixels": rng.random((N, 2, 3)).astype(np.float32).tolist(),
            "label": list(range(N)),
            "text": [f"doc {i}" for i in range(N)],
        },
        features=features,
    )


def formatted(ds: datasets.Dataset, fmt: str | None) -> datasets.Dataset:
    return ds if fmt is None else ds.with_format(fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("field", ["input_ids", "ragged", "pixels", "label", "text"])
def test_chunked_reads_equal_one_item_at_a_time(fmt: str | None, field: str) -> None:
    ds = formatted(corpus(), fmt)
    one_by_one = [ds[i][field] for i in range(len(ds))]  # a list: no __getitems__
    chunked = build_manifest(ds, field=field, chunk_size=7)
    assert chunked.size == N
    assert chunked.digest == build_manifest(one_by_one).digest
    assert chunked.fingerprints[3] == fingerprint(ds[3][field])


def test_integer_columns_digest_alike_in_every_format_floats_do_not() -> None:
    """Token ids are int64 in every format (an int32 column too), so one manifest serves a
    loader in any format; a float column is float64 as Python lists and float32 as arrays
    or tensors, so its manifest must come from the format the loader reads."""
    ds = corpus()
    ids = {build_manifest(formatted(ds, f), field="input_ids").digest for f in FORMATS}
    assert len(ids) == 1
    pixels = {f: build_manifest(formatted(ds, f), field="pixels").digest for f in FORMATS}
    assert pixels["numpy"] == pixels["torch"] != pixels[None]
    rows = torch.tensor(ds["input_ids"][:4])  # what a loader stacks: int64 rows
    assert build_manifest(ds, field="input_ids").fingerprints[:4].tolist() == [
        fingerprint(r) for r in rows
    ]


def test_iterable_dataset_subset_and_transform() -> None:
    ds = corpus()
    expected = build_manifest(ds, field="input_ids")
    streamed = ds.to_iterable_dataset(num_shards=3)  # unshuffled: a stable order
    assert build_manifest(streamed, field="input_ids").digest == expected.digest
    evens = Subset(ds.with_format("torch"), list(range(0, N, 2)))  # Subset has __getitems__
    assert build_manifest(evens, field="input_ids").fingerprints.tolist() == (
        expected.fingerprints[::2].tolist()
    )
    both = build_manifest(ds, transform=lambda row: row["input_ids"] + row["ragged"])
    assert both.fingerprints[2] == fingerprint(ds[2]["input_ids"] + ds[2]["ragged"])


def test_streamed_to_parquet_in_row_groups(tmp_path: Path) -> None:
    ds = corpus().with_format("torch")
    seen: list[int] = []
    written = write_manifest_of(
        ds,
        tmp_path / "m.parquet",
        field="input_ids",
        chunk_size=10,
        progress=lambda d, _: seen.append(d),
    )
    assert seen == [10, 20, N] and written.size == N
    assert read_manifest(written.path).digest == build_manifest(ds, field="input_ids").digest


def test_rows_without_a_field_are_refused_naming_the_columns() -> None:
    ds = corpus()
    with pytest.raises(
        TypeError, match=r"dicts \(fields: input_ids, ragged, pixels, label, text\)"
    ):
        build_manifest(ds)
    with pytest.raises(KeyError, match=r"no field 'tokens' \(they have: input_ids, ragged"):
        build_manifest(ds.with_format("numpy"), field="tokens")
