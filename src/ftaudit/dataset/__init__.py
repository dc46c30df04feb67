"""Data identity without torch: content fingerprints and dataset manifests.

A fingerprint is a 64-bit digest of one sample's canonical bytes (dtype, shape and the
little-endian data); a manifest maps every dataset item to its fingerprint and is
stored as Parquet in the run. The trainer hooks fingerprint what the model really
receives (:mod:`ftaudit.trainer_hooks.torch.fingerprints`) and rule FT008 compares the
two. Torch tensors are accepted by duck typing: this package never imports torch.

The builder's names load on first use (PEP 562): the verifier reads manifests and never
imports the manifest builder.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# eager: the verifier reads manifests (and ``fingerprint`` the function must shadow the
# submodule of that name, which importing ``manifest`` binds here)
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

if TYPE_CHECKING:
    from ftaudit.dataset.build import build_manifest, write_manifest_of

_BUILD = frozenset({"build_manifest", "write_manifest_of"})
"""The builder's names, loaded on first use."""

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


def __getattr__(name: str) -> Any:
    if name not in _BUILD:
        raise AttributeError(f"module 'ftaudit.dataset' has no attribute {name!r}")
    value = getattr(import_module("ftaudit.dataset.build"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
