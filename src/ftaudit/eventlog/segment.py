"""Sealed segments: one immutable Parquet file per writer flush.

Where they live is :mod:`ftaudit.eventlog.rundir`'s business (``segment_path``).
A flush writes every buffered event of one writer into ONE file, whatever their types,
so a flush is atomic as a whole: a crash loses a whole unflushed tail, never part of one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.codecs import compression
from ftaudit.eventlog.keys import segment_mac

META_PREFIX = "ftaudit."


DIGEST_KEY = f"{META_PREFIX}digest"
MAC_KEY = f"{META_PREFIX}mac"
PARTS_KEY = f"{META_PREFIX}parts"
DIGEST_PLACEHOLDER = "0" * 64
"""The footer value the digest is computed with: a file's digest is the SHA-256 of its bytes
with its own digest value (and its MAC, when it has one) replaced by this (see
:func:`file_digest`)."""


@dataclass(frozen=True)
class Part:
    """One original segment that ``ftaudit compact`` merged into a larger one: its
    sequence range and the chain evidence it carried (digest, link, MAC)."""

    first_seq: int
    last_seq: int
    digest: str
    prev_digest: str
    mac: str = ""

    def to_json(self) -> list:
        return [self.first_seq, self.last_seq, self.digest, self.prev_digest, self.mac]

    @classmethod
    def from_json(cls, value: list) -> Part:
        if not isinstance(value, list) or len(value) != 5:
            raise ValueError(f"malformed part {value!r}")
        first, last, digest, prev, tag = value
        if not all(isinstance(v, int) for v in (first, last)) or not all(
            isinstance(v, str) for v in (digest, prev, tag)
        ):
            raise ValueError(f"malformed part {value!r}")
        return cls(first, last, digest, prev, tag)


@dataclass(frozen=True)
class SegmentMeta:
    """What a segment's footer says about it."""

    schema_version: int
    run_id: str
    writer: str
    incarnation: int
    first_seq: int
    last_seq: int
    types: tuple[str, ...]
    digest: str = ""
    """SHA-256 of the whole file (its own digest value zeroed); "" in segments written before
    ftaudit recorded digests."""
    prev_digest: str = ""
    """The digest of the writer's previous segment ("" for its first): the hash chain."""
    dropped: int = 0
    """Events the writer dropped just before this segment (the disk failed for too long)."""
    mac: str = ""
    """HMAC-SHA256 of the digest with the run's key (``eventlog/keys.py``); "" when the
    writer had no key."""
    parts: tuple[Part, ...] = ()
    """A compacted segment: the original segments it holds, in order (``ftaudit.parts``);
    () for a segment a writer sealed."""

    @property
    def head_digest(self) -> str:
        """The chain head this segment ends at: its own digest, or for a compacted segment
        the last original's (what the writer chained on and the records name)."""
        return self.parts[-1].digest if self.parts else self.digest

    def to_metadata(self) -> dict[bytes, bytes]:
        values = {
            "schema_version": str(self.schema_version),
            "run_id": self.run_id,
            "writer": self.writer,
            "incarnation": str(self.incarnation),
            "first_seq": str(self.first_seq),
            "last_seq": str(self.last_seq),
            "types": ",".join(self.types),
            "digest": self.digest or DIGEST_PLACEHOLDER,
            "prev_digest": self.prev_digest,
            "dropped": str(self.dropped),
        }
        if self.mac:
            values["mac"] = self.mac
        if self.parts:
            values["parts"] = json.dumps([p.to_json() for p in self.parts], separators=(",", ":"))
        return {(META_PREFIX + k).encode(): v.encode() for k, v in values.items()}

    @classmethod
    def from_metadata(cls, metadata: dict[bytes, bytes] | None) -> SegmentMeta:
        """Parse a footer; raises ``KeyError`` or ``ValueError`` when it is not ours."""
        meta = {k.decode(): v.decode() for k, v in (metadata or {}).items()}
        get = lambda key: meta[META_PREFIX + key]  # noqa: E731
        return cls(
            schema_version=int(get("schema_version")),
            run_id=get("run_id"),
            writer=get("writer"),
            incarnation=int(get("incarnation")),
            first_seq=int(get("first_seq")),
            last_seq=int(get("last_seq")),
            types=tuple(t for t in get("types").split(",") if t),
            digest=meta.get(DIGEST_KEY, ""),
            prev_digest=meta.get(f"{META_PREFIX}prev_digest", ""),
            dropped=int(meta.get(f"{META_PREFIX}dropped", "0")),
            mac=meta.get(MAC_KEY, ""),
            parts=tuple(Part.from_json(p) for p in json.loads(meta.get(PARTS_KEY, "[]"))),
        )


def _value_at(data: bytes | bytearray | memoryview, key: str) -> int:
    """Where the 64-character value of footer ``key`` sits in a segment's bytes; -1 when it
    is not there."""
    view = memoryview(data)
    if len(view) < 12 or bytes(view[-4:]) != b"PAR1":
        return -1
    footer_len = int.from_bytes(view[-8:-4], "little")
    start = len(view) - 8 - footer_len
    if start < 4:
        return -1
    name = key.encode()
    at = bytes(view[start:-8]).rfind(name)
    if at < 0:
        return -1
    at += start + len(name)
    # thrift compact protocol: the value's field header and length byte, then the value
    if at + 2 + len(DIGEST_PLACEHOLDER) > len(view) - 8 or view[at + 1] != len(DIGEST_PLACEHOLDER):
        return -1
    return at + 2


def file_digest(data: bytes | bytearray | memoryview) -> str | None:
    """SHA-256 of a segment's bytes with its own digest value (and MAC) zeroed; None without
    a digest.

    The digest covers every byte of the file (data pages, footer, every other metadata
    value), so any change to a sealed segment, a single bit included, changes it. The MAC,
    made from the digest, is the one value it cannot cover.
    """
    at = _value_at(data, DIGEST_KEY)
    if at < 0:
        return None
    slots = sorted({at, _value_at(data, MAC_KEY)} - {-1})
    view = memoryview(data)
    h = hashlib.sha256()
    done = 0
    for slot in slots:
        h.update(view[done:slot])
        h.update(DIGEST_PLACEHOLDER.encode())
        done = slot + len(DIGEST_PLACEHOLDER)
    h.update(view[done:])
    return h.hexdigest()


PARQUET_OPTIONS: Mapping[str, Any] = MappingProxyType(
    {
        "use_dictionary": False,  # zstd finds the repeats anyway: a smaller file, 20% less CPU
        "write_page_checksum": True,
        "write_statistics": ["seq", "step", "attempt", "type"],
    }
)
"""How every segment is encoded (``pyarrow.parquet.write_table`` keywords), but for the
compression, chosen per column (:func:`~ftaudit.eventlog.codecs.compression`: zstd for
large columns, lz4 for small ones)."""


def write_atomically(table: pa.Table, final: Path, *, fsync: bool, key: bytes | None = None) -> str:
    """Write ``table`` so that ``final`` is either absent or complete, never half-written.

    Written through :func:`~ftaudit.eventlog.atomic.atomic_path` (temp file, fsync,
    rename, fsync of the directory; ``fsync=False`` skips the fsyncs). The file is built
    in memory first, so its digest (see :func:`file_digest`) and, with a ``key``, the MAC
    of that digest can be patched into its footer; a failed write removes its temp file.
    Returns the digest.
    """
    from ftaudit.eventlog.atomic import write_bytes_atomically

    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=compression(table), **PARQUET_OPTIONS)
    data = bytearray(sink.getvalue().to_pybytes())
    at = _value_at(data, DIGEST_KEY)
    digest = file_digest(data)
    if at < 0 or digest is None:
        raise RuntimeError("segment footer lacks the digest placeholder")
    data[at : at + len(digest)] = digest.encode()
    if key is not None:
        mac_at = _value_at(data, MAC_KEY)
        if mac_at < 0:
            raise RuntimeError("segment footer lacks the MAC placeholder")
        data[mac_at : mac_at + len(digest)] = segment_mac(key, digest).encode()
    write_bytes_atomically(final, data, fsync=fsync)
    return digest
