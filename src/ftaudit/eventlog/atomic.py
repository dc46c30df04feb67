"""Writing a file atomically: a reader sees it absent or complete, never half-written.

Every file ftaudit writes whole (segments, checkpoint state, dataset manifests, exports)
goes through :func:`atomic_path`: a temp file beside the target, fsync, rename, fsync of
the directory. The temp file is a dot file (``.<name>.<pid>.tmp``), which is how a run
listing recognises a flush that a crash cut short (``rundir.TEMP_PREFIX``). Standard
library only: writer processes import it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ftaudit.eventlog.rundir import TEMP_PREFIX


def temp_path(target: Path) -> Path:
    """The temp file a write of ``target`` goes through (one per process)."""
    return target.with_name(f"{TEMP_PREFIX}{target.name}.{os.getpid()}.tmp")


def fsync_dir(path: Path) -> None:
    """Make a rename or creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    # fsync flushes the file, not the descriptor: a fresh one serves writers (torch.save,
    # pyarrow) that close their own
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


@contextmanager
def atomic_path(target: str | os.PathLike[str], *, fsync: bool = True) -> Iterator[Path]:
    """Yield the temp path to write ``target`` through; publish it when the block ends.

    On a normal exit the temp file is fsynced, renamed onto ``target`` and its directory
    fsynced; if the block raises, the temp file is removed and ``target`` is untouched.
    With ``fsync=False`` the rename still hides partial files from readers, but a machine
    crash (not a process crash) may lose the file.
    """
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(final)
    try:
        yield tmp
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        with suppress(OSError):  # the write's own error is the one to report
            tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(final.parent)


def write_bytes_atomically(
    target: str | os.PathLike[str], data: bytes | bytearray, *, fsync: bool = True
) -> None:
    """Write ``data`` to ``target`` through :func:`atomic_path`."""
    with atomic_path(target, fsync=fsync) as tmp:
        tmp.write_bytes(data)


__all__ = ["atomic_path", "fsync_dir", "temp_path", "write_bytes_atomically"]
