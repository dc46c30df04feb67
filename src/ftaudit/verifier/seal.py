"""Sealing a run: every writer's final head, kept outside the run, optionally signed.

The hash chain has no key: whoever can write the run directory can rewrite a writer's
history and recompute every digest, chain link and checkpoint record after it. A seal
closes that: ``ftaudit seal RUN_DIR -o MANIFEST`` records the head (last sequence
number, digest) of every writer, and ``ft-verify RUN_DIR --manifest MANIFEST`` checks
that the run still reaches each head with the same digest (so, by the chain, holds the
same events up to it) and has no writer the seal does not name. Kept where the run's
writers cannot reach (a CI artifact), the seal anchors the run as it was when sealed.

With a key (``FTAUDIT_HMAC_KEY``, or a key file: ``FTAUDIT_HMAC_KEY_FILE`` or
``--key-file``) the seal carries an HMAC-SHA256 over its contents: a seal edited by
someone without the key is refused. The key is never written, logged or shown.
"""

from __future__ import annotations

import hmac
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from ftaudit.errors import (
    SealError,
)
from ftaudit.eventlog.atomic import write_bytes_atomically
from ftaudit.eventlog.events import WriterHead
from ftaudit.eventlog.heads import disk_heads
from ftaudit.eventlog.keys import KEY_ENV, KEY_FILE_ENV, load_key, mac
from ftaudit.eventlog.reader import scan_run
from ftaudit.eventlog.run import read_run_id

FORMAT_VERSION = 1


class Seal(BaseModel):
    """What ``ftaudit seal`` writes: the run's id and every writer's head, maybe signed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    run_id: str
    sealed_at: str
    segments: int
    heads: dict[str, WriterHead]
    mac: str = ""
    """HMAC-SHA256 (hex) of the seal's canonical JSON without this field; "" unsigned."""

    def payload(self) -> bytes:
        """The bytes the MAC covers: the canonical JSON of every other field."""
        data = self.model_dump(mode="json", exclude={"mac"})
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def seal_run(run_dir: str | os.PathLike[str], key: bytes | None) -> Seal:
    """Seal the run as it is now: every writer's head, checked segments, signed with ``key``."""
    scan = scan_run(run_dir)  # every segment must be a readable ftaudit segment
    heads = disk_heads(scan.run_dir)
    sealed = Seal(
        run_id=read_run_id(scan.run_dir),
        sealed_at=datetime.now(UTC).isoformat(timespec="seconds"),
        segments=len(scan.segments),
        heads=heads,
    )
    if key is None:
        return sealed
    return sealed.model_copy(update={"mac": mac(key, sealed.payload())})


def write_seal(seal: Seal, path: str | os.PathLike[str]) -> None:
    """Write ``seal`` as JSON, atomically (a reader sees the old seal or the new one, never
    a torn one); raises :class:`SealError` when ``path`` cannot be written."""
    try:
        write_bytes_atomically(path, (seal.model_dump_json(indent=2) + "\n").encode())
    except OSError as exc:
        raise SealError(f"cannot write {path}: {exc.strerror or exc}") from None


def read_seal(path: str | os.PathLike[str], key: bytes | None) -> Seal:
    """Read a seal and check its signature; raises :class:`SealError` naming the file.

    A signed seal needs the key; a seal whose MAC does not match was edited (or the key
    is another). An unsigned seal is accepted as it is: it proves what it says only as
    far as the place it was kept is trusted.
    """
    try:
        seal = Seal.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SealError(f"{path}: cannot read the seal ({exc.strerror or exc})") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the file"
        raise SealError(f"{path}: not an ftaudit seal ({where}: {first['msg']})") from None
    if seal.format_version > FORMAT_VERSION:
        raise SealError(f"{path}: seal format {seal.format_version} is newer than this ftaudit")
    if seal.mac:
        if key is None:
            raise SealError(
                f"{path}: the seal is signed; give its key ({KEY_ENV}, {KEY_FILE_ENV} or "
                "--key-file) to check it"
            )
        if not hmac.compare_digest(seal.mac, mac(key, seal.payload())):
            raise SealError(
                f"{path}: the seal's signature does not match: it was edited after sealing, "
                "or the key is not the one it was signed with"
            )
    elif key is not None:
        raise SealError(f"{path}: a key was given but the seal is not signed")
    return seal


__all__ = [
    "KEY_ENV",
    "KEY_FILE_ENV",
    "Seal",
    "SealError",
    "load_key",
    "read_seal",
    "seal_run",
    "write_seal",
]
