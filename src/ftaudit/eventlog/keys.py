"""The run's HMAC key: where it comes from, and the MACs it makes.

The hash chain has no key: whoever can write the run directory can rewrite a history and
recompute every digest after it. With a key that the writers hold and the forger does
not, each writer MACs what it seals: every segment's digest (``ftaudit.mac`` in the
footer) and every checkpoint and ``run_finished`` record (their ``mac`` field, bound to
the run, the writer and the record's sequence number). ``ft-verify`` given the same key
refuses a segment or record whose MAC is missing or wrong.

The key comes from ``WriterOptions.mac_key`` (or ``RunLog.start(..., mac_key=...)``), else
``$FTAUDIT_HMAC_KEY_FILE`` (a file holding it), else ``$FTAUDIT_HMAC_KEY`` (its UTF-8
bytes). It is never written, logged or shown.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from ftaudit.errors import KeyFileError

if TYPE_CHECKING:
    from ftaudit.eventlog.events import Event

KEY_ENV = "FTAUDIT_HMAC_KEY"
"""The HMAC key itself (its UTF-8 bytes)."""
KEY_FILE_ENV = "FTAUDIT_HMAC_KEY_FILE"
"""A file holding the HMAC key (its bytes, a trailing newline removed)."""

MAC_RECORD_TYPES = frozenset({"checkpoint_saved", "run_finished"})
"""The records that vouch for other writers' heads, MAC'd one by one besides their segment."""

_SEGMENT_DOMAIN = b"ftaudit.segment\0"
_RECORD_DOMAIN = b"ftaudit.record\0"


def load_key(key_file: str | os.PathLike[str] | None = None) -> bytes | None:
    """The HMAC key: from ``key_file``, else ``$FTAUDIT_HMAC_KEY_FILE``, else
    ``$FTAUDIT_HMAC_KEY``; None when none is set. Raises :class:`KeyFileError` for an
    unreadable or empty key file (naming the file, never the key)."""
    path = key_file or os.environ.get(KEY_FILE_ENV)
    if path:
        try:
            key = Path(path).read_bytes().rstrip(b"\r\n")
        except OSError as exc:
            raise KeyFileError(
                f"{path}: cannot read the key file ({exc.strerror or exc})"
            ) from None
        if not key:
            raise KeyFileError(f"{path}: the key file is empty")
        return key
    value = os.environ.get(KEY_ENV)
    return value.encode() if value else None


def mac(key: bytes, payload: bytes) -> str:
    """HMAC-SHA256 of ``payload`` (hex)."""
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def segment_mac(key: bytes, digest: str) -> str:
    """The MAC of a segment: over its digest, which covers every other byte of the file
    (its writer, run, sequence range and chain link among them)."""
    return mac(key, _SEGMENT_DOMAIN + digest.encode())


def record_mac(key: bytes, *, run_id: str, writer: str, seq: int, event: Event) -> str:
    """The MAC of one record: its fields (``mac`` aside) bound to where it was logged, so a
    record copied, swapped or moved to another place in the log no longer matches."""
    body = {
        "run_id": run_id,
        "writer": writer,
        "seq": seq,
        # step and attempt may come from the step context at log time: the segment's MAC
        # covers them; the record's own MAC covers what it says
        "event": event.model_dump(mode="json", exclude={"mac", "step", "attempt"}),
    }
    payload = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return mac(key, _RECORD_DOMAIN + payload)


def same(a: str, b: str) -> bool:
    """Compare two MACs in constant time."""
    return hmac.compare_digest(a.encode(), b.encode())


__all__ = [
    "KEY_ENV",
    "KEY_FILE_ENV",
    "MAC_RECORD_TYPES",
    "load_key",
    "mac",
    "record_mac",
    "same",
    "segment_mac",
]
