"""TFRecord framing (the container of TensorBoard event files), without TensorFlow.

Each record is ``uint64 length``, ``uint32 masked CRC-32C of the length``, the data, and
``uint32 masked CRC-32C of the data``, little endian. CRC-32C (Castagnoli) is computed
with a 256-entry table: event files of metrics are small, so pure Python is enough.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

_POLY = 0x82F63B78  # CRC-32C, reflected


def _table() -> tuple[int, ...]:
    rows = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        rows.append(crc)
    return tuple(rows)


_TABLE = _table()


def crc32c(data: bytes) -> int:
    """The CRC-32C of ``data`` (``crc32c(b"123456789") == 0xE3069283``)."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """The masked CRC TFRecord stores (a rotation plus a constant, per the format)."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_record(out: BinaryIO, data: bytes) -> None:
    """Append one record holding ``data``."""
    header = struct.pack("<Q", len(data))
    out.write(header)
    out.write(struct.pack("<I", masked_crc(header)))
    out.write(data)
    out.write(struct.pack("<I", masked_crc(data)))
