"""TensorBoard event files of scalar metrics, encoded by hand (no protobuf, no TensorFlow).

The messages written are ``tensorboard/compat/proto/event.proto`` ``Event`` (``wall_time``
= 1, double; ``step`` = 2, int64; ``file_version`` = 3, string; ``summary`` = 5) and
``summary.proto`` ``Summary`` (``value`` = 1) / ``Summary.Value`` (``tag`` = 1,
``simple_value`` = 2, float). A scalar is stored as a 32-bit float, as TensorBoard's own
writers do for ``simple_value``.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from collections.abc import Iterable
from pathlib import Path

from ftaudit.eventlog.atomic import atomic_path
from ftaudit.export.metrics import CommittedMetric
from ftaudit.export.tfrecord import write_record

FILE_VERSION = "brain.Event:2"


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # int64 as protobuf encodes it (negatives as 10 bytes)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def scalar_event(wall_time: float, step: int, tag: str, value: float) -> bytes:
    """One serialized ``Event`` holding one scalar ``Summary.Value``."""
    summary_value = _bytes_field(1, tag.encode()) + _key(2, 5) + struct.pack("<f", value)
    summary = _bytes_field(1, summary_value)
    return (
        _key(1, 1)
        + struct.pack("<d", wall_time)
        + _key(2, 0)
        + _varint(step)
        + (_bytes_field(5, summary))
    )


def version_event(wall_time: float) -> bytes:
    """The first event of every file: the file format version."""
    return _key(1, 1) + struct.pack("<d", wall_time) + _bytes_field(3, FILE_VERSION.encode())


def write_tensorboard(metrics: Iterable[CommittedMetric], log_dir: str | os.PathLike[str]) -> Path:
    """Write ``metrics`` as one event file in ``log_dir`` (created); returns its path.

    The tag of a metric is its :attr:`CommittedMetric.tag`; its step is the ftaudit step.
    """
    folder = Path(log_dir)
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    path = folder / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.ftaudit"
    with atomic_path(path) as tmp, open(tmp, "wb") as out:
        write_record(out, version_event(now))
        for m in metrics:
            write_record(out, scalar_event(m.wall_time, m.step, m.tag, m.value))
    return path
