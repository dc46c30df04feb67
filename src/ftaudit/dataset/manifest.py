"""The dataset manifest: every item's fingerprint, as one Parquet file.

Columns ``item`` (int64, 0 .. size-1 in order) and ``fingerprint`` (int64). The footer
carries ``ftaudit.manifest_version``, ``ftaudit.algorithm``, ``ftaudit.dataset_size``,
``ftaudit.digest`` and a free-text ``ftaudit.source``. The digest names the manifest:
SHA-256 (hex) over the algorithm name, the size and the fingerprints (little-endian
int64, in item order), so the same dataset always has the same digest wherever and
however its manifest was built. A run keeps its manifests in ``RUN_DIR/manifests/``,
each named ``<digest>.parquet``; a run can also name a manifest stored elsewhere by
its digest (``ft-verify --data-manifest PATH``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.dataset.fingerprint import ALGORITHM
from ftaudit.errors import (
    ManifestError,
)
from ftaudit.eventlog.arrays import in_sorted, int64_numpy, unique_sorted
from ftaudit.eventlog.atomic import atomic_path
from ftaudit.eventlog.rundir import manifest_path

MANIFEST_VERSION = 1

SCHEMA = pa.schema([("item", pa.int64()), ("fingerprint", pa.int64())])
_KEYS = ("manifest_version", "algorithm", "dataset_size", "digest")


class DigestBuilder:
    """The manifest digest, fed chunk by chunk (a manifest is built incrementally)."""

    def __init__(self, algorithm: str = ALGORITHM) -> None:
        self._hash = hashlib.sha256(algorithm.encode() + b"\0")
        self.size = 0

    def update(self, fingerprints: np.ndarray) -> None:
        self._hash.update(np.ascontiguousarray(fingerprints, dtype="<i8").tobytes())
        self.size += len(fingerprints)

    def hexdigest(self) -> str:
        final = self._hash.copy()
        final.update(b"\0" + str(self.size).encode())
        return final.hexdigest()


def manifest_digest(fingerprints: np.ndarray, algorithm: str = ALGORITHM) -> str:
    """The digest of a whole manifest's fingerprints (in item order)."""
    builder = DigestBuilder(algorithm)
    builder.update(np.asarray(fingerprints, dtype=np.int64))
    return builder.hexdigest()


@dataclass(frozen=True)
class DatasetManifest:
    """index -> fingerprint for every item of a dataset, its size and its digest."""

    fingerprints: np.ndarray
    digest: str
    algorithm: str = ALGORITHM
    source: str = ""

    @classmethod
    def of(cls, fingerprints: Sequence[int] | np.ndarray, source: str = "") -> DatasetManifest:
        fps = np.asarray(fingerprints, dtype=np.int64)
        fps.setflags(write=False)
        return cls(fps, manifest_digest(fps), ALGORITHM, source)

    @property
    def size(self) -> int:
        return int(self.fingerprints.size)

    def items_with(self, fingerprints: Iterable[int]) -> dict[int, list[int]]:
        """For each of ``fingerprints``: the items whose content has it (maybe none)."""
        wanted = unique_sorted(np.fromiter(fingerprints, dtype=np.int64))
        hit = np.flatnonzero(in_sorted(self.fingerprints, wanted))
        out: dict[int, list[int]] = {int(f): [] for f in wanted}
        for item in hit.tolist():
            out[int(self.fingerprints[item])].append(item)
        return out


def metadata_for(manifest_size: int, digest: str, algorithm: str, source: str) -> dict[str, str]:
    return {
        "ftaudit.manifest_version": str(MANIFEST_VERSION),
        "ftaudit.algorithm": algorithm,
        "ftaudit.dataset_size": str(manifest_size),
        "ftaudit.digest": digest,
        "ftaudit.source": source,
    }


def write_manifest(manifest: DatasetManifest, path: str | os.PathLike[str]) -> Path:
    """Write ``manifest`` to ``path`` atomically (temp file, fsync, rename)."""
    target = Path(path)
    table = pa.table(
        {
            "item": pa.array(np.arange(manifest.size, dtype=np.int64)),
            "fingerprint": pa.array(manifest.fingerprints),
        },
        schema=SCHEMA.with_metadata(
            metadata_for(manifest.size, manifest.digest, manifest.algorithm, manifest.source)
        ),
    )
    with atomic_path(target) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return target


def read_manifest(path: str | os.PathLike[str]) -> DatasetManifest:
    """Read and check a manifest; raises :class:`ManifestError` naming the file."""
    source = Path(path)
    try:
        pf = pq.ParquetFile(source)
        meta = {k.decode(): v.decode() for k, v in (pf.metadata.metadata or {}).items()}
        table = pf.read()
    except FileNotFoundError:
        raise ManifestError(f"{source}: no such manifest file") from None
    except (OSError, pa.ArrowException) as exc:
        raise ManifestError(f"{source}: not a readable Parquet manifest ({exc})") from None
    missing = [k for k in _KEYS if f"ftaudit.{k}" not in meta]
    if missing:
        raise ManifestError(f"{source}: not an ftaudit manifest (no {', '.join(missing)})")
    if int(meta["ftaudit.manifest_version"]) > MANIFEST_VERSION:
        raise ManifestError(
            f"{source}: manifest version {meta['ftaudit.manifest_version']} is newer than "
            "this ftaudit reads"
        )
    if not table.schema.equals(SCHEMA, check_metadata=False):
        raise ManifestError(f"{source}: columns must be item int64, fingerprint int64")
    # not to_numpy(): pyarrow imports pandas for it, half a second on the verify path
    try:
        items = int64_numpy(table.column("item"))
        fps = int64_numpy(table.column("fingerprint"))
    except ValueError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    size = int(meta["ftaudit.dataset_size"])
    if items.size != size or not np.array_equal(items, np.arange(size)):
        raise ManifestError(f"{source}: items must be 0..{size - 1} in order")
    digest = manifest_digest(fps, meta["ftaudit.algorithm"])
    if digest != meta["ftaudit.digest"]:
        raise ManifestError(
            f"{source}: the fingerprints do not match the recorded digest (the file was edited)"
        )
    fps.setflags(write=False)
    return DatasetManifest(fps, digest, meta["ftaudit.algorithm"], meta.get("ftaudit.source", ""))


def find_manifest(
    run_dir: str | os.PathLike[str], digest: str, extra: Sequence[str | os.PathLike[str]] = ()
) -> DatasetManifest | None:
    """The manifest of ``digest``: in the run, else among ``extra`` files; None if absent.

    A file whose content does not hash to ``digest`` is never taken for it.
    """
    inside = manifest_path(run_dir, digest)
    if inside.is_file():
        found = read_manifest(inside)
        if found.digest == digest:
            return found
        raise ManifestError(f"{inside}: its digest is {found.digest}, not its name's")
    for path in extra:
        candidate = read_manifest(path)
        if candidate.digest == digest:
            return candidate
    return None
