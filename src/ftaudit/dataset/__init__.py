"""Data identity without torch: content fingerprints and dataset manifests.

A fingerprint is a 64-bit digest of one sample's canonical bytes (dtype, shape and the
little-endian data); a manifest maps every dataset item to its fingerprint and is
stored as Parquet in the run. The trainer hooks fingerprint what the model really
receives (:mod:`ftaudit.trainer_hooks.torch.fingerprints`) and rule FT008 compares the
two. Torch tensors are accepted by duck typing: this package never imports torch.

The package's names load on first use (PEP 562): the verifier reads manifests and never
imports the manifest builder.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOME = {
    "build_manifest": "build",
    "write_manifest_of": "build",
    "ALGORITHM": "fingerprint",
    "canonical_array": "fingerprint",
    "fingerprint": "fingerprint",
    "fingerprint_rows": "fingerprint",
    "DatasetManifest": "manifest",
    "ManifestError": "manifest",
    "find_manifest": "manifest",
    "manifest_digest": "manifest",
    "read_manifest": "manifest",
    "write_manifest": "manifest",
}
"""Each public name and the submodule that defines it."""

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
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ftaudit.dataset' has no attribute {name!r}")
    value = getattr(import_module(f"ftaudit.dataset.{home}"), name)
    globals()[name] = value  # a submodule's import may bind its own name here
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
