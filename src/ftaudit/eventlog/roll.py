"""A writer rolling its small sealed segments into larger ones as it goes.

The hooks flush every step per writer, so a long run would hold one small segment per
step per process, and the verifier pays per file (pyarrow decodes a small segment in
about 1-4 ms of CPU, whatever its rows). After each flush the writer hands its sealed
segment here; once ``roll_segments`` consecutive small ones (at most ``flush_rows``
events in all) have gathered, they are sealed again as one merged segment
(:mod:`ftaudit.eventlog.merge`), built from the tables still in memory: nothing is read
back.

Durability is the flush's, never the roll's: each flush is sealed on its own first, so a
crash loses nothing that was durable. The merged segment appears under a new name (the
originals' files never change), the listing then skips the originals it holds, and they
are removed one roll later, so that a reader which listed them just before the roll can
still read them (a reader that is slower than that lists the run again: see
``rundir.relisting``). At a clean close (:meth:`Roller.close`) the tail is rolled too
(from 32 segments, an eighth of a roll), and every original is removed: a finished writer
leaves no run of small segments. A hole (dropped events, a sequence gap) starts a new roll: it stays
visible. A roll that fails leaves the originals as they are (logged once): it is only an
optimisation for the readers.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import pyarrow as pa

from ftaudit.eventlog.keys import segment_mac
from ftaudit.eventlog.merge import Original, merged, write_merged
from ftaudit.eventlog.segment import SegmentMeta

log = logging.getLogger("ftaudit.eventlog")


class Roller:
    """One writer's unrolled tail of sealed segments, and the originals of its last roll."""

    def __init__(
        self, run_dir: Path, *, segments: int, rows: int, key: bytes | None, fsync: bool
    ) -> None:
        self._run_dir = run_dir
        self._segments = segments
        self._rows = rows
        self._key = key
        self._fsync = fsync
        self._tail: list[tuple[Original, Path]] = []
        self._tail_rows = 0
        self._stale: list[Path] = []  # the last roll's originals, removed at the next roll
        self._warned = False
        self.rolls = 0

    def sealed(self, table: pa.Table, meta: SegmentMeta, digest: str, path: Path) -> None:
        """A segment the writer just sealed at ``path`` (``meta`` as built, before its
        digest was known); rolls the tail when it is long enough. Never raises."""
        mac = segment_mac(self._key, digest) if self._key is not None else ""
        meta = dataclasses.replace(meta, digest=digest, mac=mac)
        last = self._tail[-1][0].meta if self._tail else None
        if meta.dropped or (last is not None and meta.first_seq != last.last_seq + 1):
            self._tail, self._tail_rows = [], 0  # a hole starts a new roll
        if self._tail_rows + table.num_rows > self._rows:
            self.roll()  # full: what came before is rolled without this one
        if table.num_rows >= self._rows:
            return  # a large segment already: nothing to gain from merging it
        self._tail.append((Original(table, meta), path))
        self._tail_rows += table.num_rows
        if len(self._tail) >= self._segments:
            self.roll()

    def roll(self) -> None:
        """Seal the tail as one merged segment, then remove the previous roll's originals."""
        tail, self._tail, self._tail_rows = self._tail, [], 0
        if len(tail) < 2:
            return
        try:
            table, meta = merged([o for o, _ in tail], keyed=self._key is not None)
            write_merged(self._run_dir, table, meta, key=self._key, fsync=self._fsync)
        except Exception as exc:  # the originals are durable and stay: nothing is lost
            if not self._warned:
                self._warned = True
                log.warning("ftaudit: cannot roll segments of %s: %s", tail[0][0].meta.writer, exc)
            return
        self.rolls += 1
        stale, self._stale = self._stale, [path for _, path in tail]
        _remove(stale)

    def close(self) -> None:
        """The writer's last flush is durable: roll what is left of the tail (when it holds
        at least :attr:`close_tail` segments) and remove every original (a reader that listed
        one lists the run again and reads the merged one)."""
        if len(self._tail) >= self.close_tail:
            self.roll()
        stale, self._stale = self._stale, []
        _remove(stale)

    @property
    def close_tail(self) -> int:
        """The shortest tail worth rolling at a close: an eighth of a roll (32 segments by
        default, at least 2). A shorter tail costs a reader well under a tenth of a second,
        and a short-lived writer's few flushes stay the files it sealed."""
        return max(2, self._segments // 8)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except OSError:
            pass  # already gone (``ftaudit compact``), or the disk refuses: skipped anyway


__all__ = ["Roller"]
