"""The contents a follower's windows left behind: FT008's repeats across the window's edge.

FT008 looks, within an epoch, for one content trained twice (at two positions, or by two
cells). Offline every committed sample is loaded. A follower's poll loads the trainers'
rows from the step before the first one it judges (``since - 1``) on, so a content fed
again later than that would be found by the final verdict only. Its
:class:`ContentLedger` keeps the committed samples each poll saw; at the next poll, those
of the steps the new window no longer holds are folded into levels, and the window's
samples are looked up there: by their (epoch, content) hash, or by position where the
run has a dataset manifest (:attr:`ContentLedger.by_position`).

What it holds is bounded by the dataset: a repeat is one within an epoch, so only the
epochs from the one before the window's lowest on are kept, one entry per position,
cell and attempt. A resume drops the steps its incarnation runs again (its window holds
them). A follower attached after step 0, or a window that went back to an epoch the
ledger dropped, has not seen every sample it would compare with (:attr:`ContentLedger.whole`):
FT008 reads them from the log once (:meth:`ContentLedger.refold`), the epochs from the
one before the window's on, as a resume rebuilds any follower state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np

from ftaudit.eventlog.arrays import concat_ranges, in_sorted, unique_sorted

NO_ATTEMPT = np.iinfo(np.int64).max
"""An attempt nobody named: sorts after every attempt of its step, as the fed rows do."""


@dataclass(frozen=True)
class Contents:
    """Committed samples as FT008 compares them, one row per sample."""

    mixed: np.ndarray
    """The (epoch, fingerprint) hash (``uint64``): equal contents of an epoch share it."""
    epoch: np.ndarray
    fingerprint: np.ndarray
    position: np.ndarray
    item: np.ndarray
    """The item the position names (``UNKNOWN`` where no order or claim says)."""
    cell: np.ndarray
    incarnation: np.ndarray
    step: np.ndarray
    attempt: np.ndarray
    """The attempt that fed it (:data:`NO_ATTEMPT`: not named)."""

    def __len__(self) -> int:
        return int(self.mixed.size)

    def take(self, rows: np.ndarray | slice) -> Contents:
        """The rows ``rows`` (indices, a mask or a slice)."""
        return Contents(*(getattr(self, f.name)[rows] for f in fields(self)))

    @staticmethod
    def joined(parts: Sequence[Contents]) -> Contents:
        return Contents(
            *(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Contents))
        )


def mix(epoch: np.ndarray, fingerprint: np.ndarray) -> np.ndarray:
    """The (epoch, fingerprint) hash: equal pairs always share it, others rarely do."""
    return fingerprint.view(np.uint64) ^ (epoch.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


def _before_step(samples: Contents, edge: int) -> Contents:
    """The samples of steps before ``edge``; a slice where the steps ascend (samples come
    in logging order: one incarnation's steps ascend)."""
    step = samples.step
    if step.size < 2 or bool(np.all(step[1:] >= step[:-1])):
        return samples.take(slice(0, int(np.searchsorted(step, edge))))
    return samples.take(step < edge)


@dataclass(frozen=True)
class _Level:
    """Folded samples of one epoch, with the key they are looked up by: sorted by it, or
    (by position) as they came, which a poll's samples nearly are."""

    samples: Contents
    key: np.ndarray
    low: int
    high: int
    ordered: bool
    """Whether :attr:`key` ascends."""

    @staticmethod
    def of(samples: Contents, key: np.ndarray, *, ordered: bool) -> _Level:
        if ordered:
            return _Level(samples, key, int(key[0]), int(key[-1]), True)
        return _Level(samples, key, int(key.min()), int(key.max()), False)

    def kept(self, rows: np.ndarray) -> _Level | None:
        samples, key = self.samples.take(rows), self.key[rows]
        return _Level.of(samples, key, ordered=self.ordered) if key.size else None

    def in_order(self) -> tuple[Contents, np.ndarray]:
        """Its samples and keys sorted by key (a search of an unordered level is rare: a
        repeated position, or a resume that replays one)."""
        if self.ordered:
            return self.samples, self.key
        order = np.argsort(self.key, kind="stable")
        return self.samples.take(order), self.key[order]


@dataclass
class ContentLedger:
    """A follower's committed samples of the steps its windows left, by (epoch, content)."""

    epochs: dict[int, list[_Level]] = field(default_factory=dict)
    """Per epoch, its levels (by hash: larger ones first, two of like size merged, so a
    poll's fold costs its own samples, amortized, not the ledger's; by position: one a
    poll, as it came); an epoch the windows have passed is dropped whole."""
    by_position: bool = False
    """Whether samples are looked up by position, not by (epoch, content) hash. With a
    dataset manifest every sample compared matched its item, so a content is trained
    twice in an epoch only where its item is: a repeat FT008 reports is one position fed
    by two cells (two positions whose items are equal are the dataset's doing). The
    committed stream's positions ascend, so a window's lie past every folded one but
    where a position is fed again: a level is searched only then, and nothing is sorted
    at a fold (hashes need a full sort)."""
    pending: Contents | None = None
    """The committed samples of the last poll's window, not folded yet."""
    top: int = -1
    """The largest step folded."""
    kept_from: int = 0
    """The lowest epoch still held (earlier ones were dropped)."""
    whole: bool = True
    """Whether it holds every committed sample of the steps before the window, in the
    epochs from :attr:`kept_from` on."""
    started: bool = False

    @property
    def levels(self) -> list[Contents]:
        """Every folded sample, level by level."""
        return [lv.samples for levels in self.epochs.values() for lv in levels]

    def key(self, samples: Contents) -> np.ndarray:
        """What samples are looked up by."""
        return samples.position if self.by_position else samples.mixed

    def before(self, since: int) -> None:
        """Fold what the last window held of the steps before ``since - 1`` (the new window
        holds the rest), and drop the steps a resume runs again."""
        edge = since - 1
        if not self.started:
            self.started, self.whole = True, edge <= 0  # attached late: steps unseen
        if self.pending is not None:
            self._add(_before_step(self.pending, edge))
            self.pending = None
        if self.top >= edge:  # a resume: the window holds those steps again
            self.epochs = {
                epoch: kept
                for epoch, levels in self.epochs.items()
                if (kept := [k for lv in levels if (k := lv.kept(lv.samples.step < edge))])
            }
            self.top = max((int(lv.step.max()) for lv in self.levels), default=-1)

    def holds(self, window: Contents, *, by_position: bool) -> bool:
        """Whether it holds every committed sample before ``window`` of the window's
        epochs, looked up as asked (not: attached late, a resume back into an epoch it
        dropped, a manifest that came or went)."""
        if not len(window):
            return True
        same = by_position == self.by_position or not self.epochs
        return self.whole and same and int(window.epoch.min()) >= self.kept_from

    def refold(self, floor: int, earlier: Contents, *, by_position: bool) -> None:
        """Start again from ``earlier``: every committed sample of epochs from ``floor`` on
        at the steps before the window, read from the log."""
        self.epochs, self.pending, self.top = {}, None, -1
        self.kept_from, self.whole, self.by_position = floor, True, by_position
        self._add(earlier)

    def saw(self, window: Contents, *, by_position: bool) -> None:
        """Keep the window's committed samples of the steps from ``since - 1`` on (one row
        per feeding of a position by a cell in an attempt) for the next poll's fold; drop
        the epochs before the one before its lowest (no later window repeats a content
        there, but a resume back over one epoch's edge)."""
        if not len(window):
            return
        if not self.epochs:
            self.by_position = by_position
        floor = int(window.epoch.min()) - 1
        if floor > self.kept_from:
            self.epochs = {e: levels for e, levels in self.epochs.items() if e >= floor}
            self.kept_from = floor
        self.pending = window

    def matching(self, window: Contents) -> tuple[np.ndarray, Contents] | None:
        """The samples of ``window`` whose key some folded sample of their epoch has (a
        mask), and those folded samples; None: no such sample."""
        if not len(window):
            return None
        lo, hi = int(window.epoch.min()), int(window.epoch.max())
        keys = self.key(window)
        first, last = int(keys.min()), int(keys.max())
        searched = [
            lv.in_order()
            for e, levels in self.epochs.items()
            if lo <= e <= hi
            for lv in levels
            if lv.low <= last and first <= lv.high
        ]
        if not searched:  # by position, the usual case: the window's lie past them all
            return None
        # sorted, each binary search starts where the last one ended: 2-3x faster
        needles = np.sort(keys)
        hits = unique_sorted(
            np.concatenate([needles[in_sorted(needles, key)] for _, key in searched])
        )
        if not hits.size:
            return None
        parts = []
        for samples, key in searched:
            start = np.searchsorted(key, hits, side="left")
            count = np.searchsorted(key, hits, side="right") - start
            if count.any():
                parts.append(samples.take(concat_ranges(start, count)))
        return in_sorted(keys, hits), Contents.joined(parts)

    def _add(self, new: Contents) -> None:
        if not len(new):
            return
        self.top = max(self.top, int(new.step.max()))
        lo, hi = int(new.epoch.min()), int(new.epoch.max())  # a poll spans an epoch or two
        for epoch in range(lo, hi + 1):
            part = new if lo == hi else new.take(new.epoch == epoch)
            if not len(part):
                continue
            levels = self.epochs.setdefault(epoch, [])
            if self.by_position:
                levels.append(_Level.of(part, part.position, ordered=False))
                continue
            part = part.take(np.argsort(part.mixed))
            levels.append(_Level.of(part, part.mixed, ordered=True))
            while len(levels) > 1 and len(levels[-2].key) <= 2 * len(levels[-1].key):
                last = levels.pop().samples
                joined = Contents.joined((levels.pop().samples, last))
                joined = joined.take(np.argsort(joined.mixed, kind="stable"))
                levels.append(_Level.of(joined, joined.mixed, ordered=True))
