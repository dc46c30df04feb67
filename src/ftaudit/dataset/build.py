"""Build a manifest from a dataset, chunk by chunk: map-style, sized, or a stable iterable.

Sources (duck-typed, nothing imported):

- a **map-style** dataset: any object with ``__len__`` and ``__getitem__`` (a torch
  ``Dataset``, a Hugging Face ``datasets.Dataset``, a list); item ``i`` is ``ds[i]``.
  One that also has ``__getitems__`` (torch's batched-fetch protocol, which
  ``datasets.Dataset`` and ``torch.utils.data.Subset`` implement) is read a chunk of
  items per call: the rows are the ones a ``DataLoader`` would fetch, several times
  faster than one ``ds[i]`` at a time on a Hugging Face dataset;
- an **iterable** whose order is stable run to run; item ``i`` is the ``i``-th value
  (a Hugging Face ``IterableDataset`` that is not shuffled, say).

``field`` picks a key of dict items (``"input_ids"`` of a tokenized Hugging Face
dataset, whose rows are dicts of lists, arrays or tensors by its format),
``transform`` any function of the item; the result must be what the trainer
fingerprints, i.e. what the model receives for that item. A fingerprint covers the
dtype, so build the manifest from the dataset in the format the loader reads: a
Hugging Face float column is ``float64`` as Python lists but ``float32`` under
``with_format("torch")`` (integer columns are ``int64`` in every format).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.dataset.fingerprint import ALGORITHM, fingerprint
from ftaudit.dataset.manifest import (
    SCHEMA,
    DatasetManifest,
    DigestBuilder,
    metadata_for,
)
from ftaudit.errors import ManifestError
from ftaudit.eventlog.atomic import atomic_path

Progress = Callable[[int, int | None], None]
"""``progress(done, total)`` after each chunk; ``total`` is None for an unsized iterable."""

CHUNK = 4096


def _items(source: Any, chunk_size: int) -> tuple[Iterator[Any], int | None]:
    if hasattr(source, "__len__") and hasattr(source, "__getitem__"):
        n = len(source)
        fetch = getattr(source, "__getitems__", None)
        if callable(fetch):
            return _fetched(fetch, n, chunk_size), n
        return (source[i] for i in range(n)), n
    if isinstance(source, Iterable):
        return iter(source), None
    raise TypeError(
        f"cannot build a manifest from a {type(source).__name__}: give a map-style dataset "
        "(__len__ and __getitem__) or an iterable with a stable order"
    )


def _fetched(fetch: Callable[[list[int]], Any], size: int, chunk_size: int) -> Iterator[Any]:
    """Items ``0 .. size-1``, ``chunk_size`` per ``__getitems__`` call."""
    for start in range(0, size, chunk_size):
        keys = list(range(start, min(start + chunk_size, size)))
        rows = list(fetch(keys))
        if len(rows) != len(keys):
            raise ValueError(f"__getitems__ returned {len(rows)} items for {len(keys)} indices")
        yield from rows


def _fields(item: Mapping[Any, Any]) -> str:
    return ", ".join(map(str, item)) or "none"


def _select(item: Any, field: str | None, transform: Callable[[Any], Any] | None) -> Any:
    if field is not None:
        if not isinstance(item, Mapping) or field not in item:
            fields = _fields(item) if isinstance(item, Mapping) else type(item).__name__
            raise KeyError(f"the dataset's items have no field {field!r} (they have: {fields})")
        item = item[field]
    elif isinstance(item, Mapping) and transform is None:
        # a whole row (every column of a Hugging Face dataset) is not what the model receives
        raise TypeError(
            f"the dataset's items are dicts (fields: {_fields(item)}): choose the field the "
            "model receives (field=, --field)"
        )
    return transform(item) if transform is not None else item


def fingerprint_chunks(
    source: Any,
    *,
    field: str | None = None,
    transform: Callable[[Any], Any] | None = None,
    chunk_size: int = CHUNK,
    progress: Progress | None = None,
) -> Iterator[np.ndarray]:
    """The fingerprints of ``source``'s items in order, ``chunk_size`` at a time."""
    items, total = _items(source, chunk_size)
    done = 0
    while True:
        chunk = [fingerprint(_select(x, field, transform)) for x in islice(items, chunk_size)]
        if not chunk:
            return
        done += len(chunk)
        yield np.asarray(chunk, dtype=np.int64)
        if progress is not None:
            progress(done, total)


def build_manifest(
    source: Any,
    *,
    field: str | None = None,
    transform: Callable[[Any], Any] | None = None,
    chunk_size: int = CHUNK,
    progress: Progress | None = None,
    description: str = "",
) -> DatasetManifest:
    """The manifest of ``source``, in memory (8 bytes per item)."""
    chunks = list(
        fingerprint_chunks(
            source, field=field, transform=transform, chunk_size=chunk_size, progress=progress
        )
    )
    fps = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.int64)
    return DatasetManifest.of(fps, description)


@dataclass(frozen=True)
class WrittenManifest:
    """What :func:`write_manifest_of` wrote."""

    path: Path
    digest: str
    size: int


def write_manifest_of(
    source: Any,
    path: str | os.PathLike[str],
    *,
    field: str | None = None,
    transform: Callable[[Any], Any] | None = None,
    chunk_size: int = CHUNK,
    progress: Progress | None = None,
    description: str = "",
) -> WrittenManifest:
    """Stream ``source``'s manifest to ``path``: one row group per chunk, atomic rename.

    Memory stays at one chunk whatever the dataset's size. An ``OSError`` raises
    :class:`ManifestError` naming what failed: ``path`` where the output failed (its
    folder, the file, the rename), the dataset (``description``) and its file where an
    item could not be read; the two are never confused.
    """
    target = Path(path)
    digest = DigestBuilder(ALGORITHM)
    chunks = _reading(
        fingerprint_chunks(
            source, field=field, transform=transform, chunk_size=chunk_size, progress=progress
        ),
        description or "the dataset",
    )
    with (
        _writing(target),
        atomic_path(target) as tmp,
        pq.ParquetWriter(tmp, SCHEMA, compression="zstd") as writer,
    ):
        for chunk in chunks:
            items = np.arange(digest.size, digest.size + chunk.size, dtype=np.int64)
            table = pa.table({"item": items, "fingerprint": chunk}, schema=SCHEMA)
            writer.write_table(table)
            digest.update(chunk)
        writer.add_key_value_metadata(
            metadata_for(digest.size, digest.hexdigest(), ALGORITHM, description)
        )
    return WrittenManifest(target, digest.hexdigest(), digest.size)


def _reading(chunks: Iterator[np.ndarray], dataset: str) -> Iterator[np.ndarray]:
    """``chunks``; an ``OSError`` the dataset raises is a :class:`ManifestError` naming the
    dataset and its file (not an ``OSError``, so :func:`_writing` leaves it alone)."""
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            return
        except OSError as exc:
            where = f"{exc.filename}: " if exc.filename else ""
            raise ManifestError(
                f"{dataset}: reading the dataset failed: {where}{exc.strerror or exc}"
            ) from exc
        yield chunk


@contextmanager
def _writing(target: Path) -> Iterator[None]:
    """An ``OSError`` inside is the output's: a :class:`ManifestError` naming ``target``."""
    try:
        yield
    except OSError as exc:
        raise ManifestError(f"cannot write {target}: {exc.strerror or exc}") from None
