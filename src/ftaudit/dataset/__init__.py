"""Data identity without torch: content fingerprints and dataset manifests.

A fingerprint is a 64-bit digest of one sample's canonical bytes (dtype, shape and the
little-endian data); a manifest maps every dataset item to its fingerprint and is
stored as Parquet in the run. The trainer hooks fingerprint what the model really
receives (:mod:`ftaudit.trainer_hooks.torch.fingerprints`) and rule FT008 compares the
two. Torch tensors are accepted by duck typing: this package never imports torch.
"""

from ftaudit.dataset.build import build_manifest, write_manifest_of
from ftaudit.dataset.fingerprint import (
    ALGORITHM,
    canonical_array,
    fingerprint,
    fingerprint_rows,
)
from ftaudit.dataset.manifest import (
    DatasetManifest,
    ManifestError,
    find_manifest,
    manifest_digest,
    read_manifest,
    write_manifest,
)

__all__ = [
    "ALGORITHM",
    "DatasetManifest",
    "ManifestError",
    "build_manifest",
    "canonical_array",
    "find_manifest",
    "fingerprint",
    "fingerprint_rows",
    "manifest_digest",
    "read_manifest",
    "write_manifest",
    "write_manifest_of",
]
