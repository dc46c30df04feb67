"""The synthetic dataset of ``ftaudit synth``: what each item's content digests to.

A synthetic run trains on a dataset of ``N`` items; stream position ``p`` reads item
``p mod N`` (the default order, SPEC §1). Item ``i``'s content fingerprint is SplitMix64
of ``i`` mixed with the run's seed: distinct for every item, stable run to run, and
computed for a whole shard at once, so millions of samples cost no per-sample hashing.
The run keeps the dataset's manifest as a real one does (``manifests/<digest>.parquet``
and a ``data_manifest`` event, :mod:`ftaudit.dataset`), and every trainer rank logs what
it fed (``sample_fingerprints``), so FT008 checks the data of a synthetic run too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ftaudit.dataset.manifest import DatasetManifest, write_manifest
from ftaudit.eventlog.events import DataManifest
from ftaudit.eventlog.rundir import MANIFESTS_DIR, manifest_path

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def item_fingerprints(items: np.ndarray, seed: int) -> np.ndarray:
    """The content fingerprints (int64) of dataset ``items`` in a run of ``seed``."""
    with np.errstate(over="ignore"):  # SplitMix64 is arithmetic modulo 2**64
        x = np.asarray(items, dtype=np.uint64) + np.uint64(seed & 0xFFFFFFFF) * _GOLDEN
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        z = z ^ (z >> np.uint64(31))
    return z.view(np.int64)


@dataclass(frozen=True)
class SynthDataset:
    """``size`` items whose fingerprints follow from ``seed``."""

    size: int
    seed: int

    def fingerprints(self, items: np.ndarray) -> np.ndarray:
        return item_fingerprints(np.asarray(items, dtype=np.int64) % self.size, self.seed)

    def manifest(self) -> DatasetManifest:
        items = np.arange(self.size, dtype=np.int64)
        return DatasetManifest.of(self.fingerprints(items), f"ftaudit synth seed {self.seed}")

    def declare(self, run_dir: Path) -> DataManifest:
        """Keep the manifest in the run (once) and return the event that declares it."""
        manifest = self.manifest()
        target = manifest_path(run_dir, manifest.digest)
        if not target.is_file():
            write_manifest(manifest, target)
        return DataManifest(
            digest=manifest.digest,
            dataset_size=manifest.size,
            algorithm=manifest.algorithm,
            path=f"{MANIFESTS_DIR}/{target.name}",
        )
