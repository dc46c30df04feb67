"""Incremental verification: the few segments that ``ft-verify --since-step K`` reads.

A trainer gating each step wants a verdict on the new steps at a cost that grows with
the new events, not with the run. Each writer's segments are written in time order and
its steps only grow, so the segments holding steps ``>= T`` are a suffix of its files:
the selection walks each writer's files backwards, reading one Parquet footer each
(the ``step`` column statistics), until a file ends before ``T``.

``T`` is the oldest step whose events a check of step ``K`` still needs: the witness rule
compares step K's rows with the allocations of the last ``keep = 0.7 B`` ring positions,
so ``T`` is the step of the oldest allocation whose ids are still in the active window
of the first new step (found by walking the drivers' files backwards by counter), less
one for the checkpoint a resumed incarnation loaded. Besides the suffixes, each
driver's first segment is read for its ``run_started`` event (the committed history
needs every incarnation's resume point), and every earlier segment whose footer lists a
data declaration (:data:`DECLARATIONS`: FT008 maps a sample index to its item through
them) for those: these "head" segments keep only :data:`HEAD` rows once loaded.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, overload

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.arrays import int64_numpy, int64_scalar, string_scalar
from ftaudit.eventlog.load import Footers
from ftaudit.eventlog.reader import (
    UNREADABLE,
    FooterChecks,
    RunScan,
    SegmentInfo,
    checked_footer,
    digest_problem,
    superseded,
    unreadable,
)
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.rundir import SegmentFile, SegmentListing, list_segments
from ftaudit.verifier.ring import keep_size

DECLARATIONS = ("data_manifest", "data_order")
"""Events that carry no step yet hold for the whole incarnation: the dataset and the order
it is read in. A window keeps them from every segment before it."""

HEAD = ("run_started", *DECLARATIONS)
"""What a head segment (before the window) is read for."""

WINDOW_TYPES = (
    "sample_advantage_summary",
    "step_applied",
    "witness_snapshot",
    *DECLARATIONS,
)
"""What the rules need from a trainer's steps between ``T`` and ``since - 1``: the
witness rule the excused samples of the allocations still in the active window, and the
instances each cell snapshotted (an instance a resumed incarnation has and the one it
resumed from had not starts from zero rows); FT011 the counter readings a rank's first
judged one grows from, which are older than ``since - 1`` where the rank sat out the
steps before (its cell crashed, then healed or was replaced); and the
:data:`DECLARATIONS`. The drivers' rows are read whole from ``T`` on (their step ends say
which of those readings count); every other row of a trainer matters from the step
before ``since`` on (the checkpoint a resumed incarnation loaded)."""


@dataclass(frozen=True)
class Kept:
    """Which rows of one segment a window loads, by sequence number: every row from
    ``whole_from`` on, the :data:`WINDOW_TYPES` rows from ``window_from`` on and the
    :data:`HEAD` rows from ``head_from`` on (None: none of them). A segment loaded whole
    has no ``Kept``.

    A merged segment (a writer's roll, ``ftaudit compact``) holds hundreds of flushes,
    often more steps than the window itself: it is loaded from the row the window needs
    on, as the flushes it merged would be (:func:`select`), not whole.
    """

    head_from: int | None = None
    window_from: int | None = None
    whole_from: int | None = None

    def start(self, event_type: str) -> int | None:
        """The sequence number the loaded rows of ``event_type`` start at (None: none)."""
        froms = [self.whole_from]
        if event_type in WINDOW_TYPES:
            froms.append(self.window_from)
        if event_type in HEAD:
            froms.append(self.head_from)
        found = [f for f in froms if f is not None]
        return min(found) if found else None

    def covers(self, other: Kept, types: Collection[str]) -> bool:
        """Whether every row ``other`` loads of a segment holding ``types``, this loads too."""
        for kind in types:
            mine, theirs = self.start(kind), other.start(kind)
            if theirs is not None and (mine is None or mine > theirs):
                return False
        return True


WHOLE = Kept(whole_from=0)
HEAD_ONLY = Kept(head_from=0)
WINDOW_ONLY = Kept(window_from=0)


_ALLOC = default_registry["witness_allocated"]
_START = default_registry["run_started"]
_COUNTER = _ALLOC.column("counter_after")
_NUM_IDS = _ALLOC.column("num_ids")
_BUFFER = _START.column("buffer_size")


@dataclass(frozen=True)
class IncrementalScope:
    """What an incremental verification loaded, for the rules to take into account."""

    since: int
    """The first step to check: violations at earlier steps are not reported."""
    lookback: int
    """The oldest step whose events were loaded (``T``)."""
    first_seq: dict[str, int]
    """Per writer, the sequence number of its first loaded segment (0: loaded whole)."""
    last_seq: dict[str, int]
    """Per writer, its last sequence number on disk (from its last footer)."""
    kept: Mapping[str, Kept]
    """The segments read in part, by path: head segments (before the window) for their
    :data:`HEAD` rows; other writers' than the drivers' from before ``since - 1`` for
    what the witness window needs (:data:`WINDOW_TYPES`); a merged segment from the
    row the window needs on. The other segments are read whole."""
    total_segments: int
    """How many sealed segments the run holds; ``len(scan.segments)`` were read."""
    partial: frozenset[str] = frozenset()
    """The writers some of whose segments from the window's first on were read in part
    (:attr:`kept`: a trainer's from before ``since - 1`` hold only the witness window's
    types; a merged segment the window begins inside, only its later rows)."""

    @cached_property
    def head_only(self) -> frozenset[str]:
        """The segments read only for their :data:`HEAD` rows (paths)."""
        return frozenset(p for p, k in self.kept.items() if k == HEAD_ONLY)

    def complete(self, writer: str) -> bool:
        """Whether every event of ``writer`` was loaded: from its first segment on, each
        read whole (a follower's window that moved past a resumed trainer's first steps
        holds only their witness rows: its restore evidence, not loaded, was taken for
        absent)."""
        return writer not in self.partial and self.first_seq.get(writer, 1) == 0


@dataclass(frozen=True)
class _Declaring:
    """What a cache knows of one writer's declaring segments (:meth:`FooterCache.declaring`)."""

    looked: int
    """How many of the writer's first segments were looked at."""
    last: Path | None
    """The last of them (None: none): still there at the same place, nothing before it moved."""
    found: tuple[int, ...]
    """The positions, among those, of the segments whose footer lists a declaration."""


@dataclass
class FooterCache:
    """Footers already read, by path, kept across calls by a long-lived reader.

    A sealed segment never changes (a flush writes a temp file and renames it), so a
    follower of a live run reads each footer once, not once per poll. What a cache
    cannot see (a segment rewritten in place) the final, uncached verification reads.
    A segment a writer's roll removed leaves the cache at the next listing (:meth:`keep`).
    """

    metadata: dict[Path, pq.FileMetaData] = field(default_factory=dict)
    """Footers parsed since the last :meth:`drop_footers` (a poll decodes its new segments
    with them); what later polls need of a footer is kept apart (its checked info, its
    largest step)."""
    read_whole: bool = False
    """Read each segment whole when its footer is read (a follower past its first poll:
    it hashes and decodes each new segment anyway): the digest is taken there and the
    reader kept in :attr:`opened`. Not before: attaching lists the whole run, and the
    footers of most of its segments are all that is read of them."""
    opened: dict[Path, pq.ParquetReader] = field(default_factory=dict)
    """The readers over the bytes of the segments read whole since the last
    :meth:`drop_footers`: the poll decodes its new segments with them (:attr:`footers`),
    where a second read and open of each cost a poll 3-4 ms."""
    infos: dict[Path, SegmentInfo] = field(default_factory=dict)
    """The checked footers asked for since the last :meth:`release`, and those it kept."""
    _asked: set[Path] = field(default_factory=set)
    """The segments whose info was asked for since the last :meth:`release`."""
    max_steps: dict[Path, int | None] = field(default_factory=dict)
    allocations: dict[Path, pa.Table] = field(default_factory=dict)
    """A driver segment's allocations (what :func:`_lookback` reads), by path."""
    buffer_sizes: dict[Path, list[int]] = field(default_factory=dict)
    """The buffer sizes a driver segment's ``run_started`` rows declare, by path."""
    digests: dict[Path, str | None] = field(default_factory=dict)
    """Whether a segment's bytes match its digest (:func:`digest_problem`), by path."""
    steps: dict[Path, tuple[Any, Any]] = field(default_factory=dict)
    """A merged segment's ``(seq, step)`` columns (numpy; no step: -1), by path: where
    a window starts in it (:meth:`_File.cut`)."""
    checks: FooterChecks = field(default_factory=FooterChecks)
    """Schemas shared by the cached footers, and the column checks already done."""
    declared: dict[str, _Declaring] = field(default_factory=dict)
    """Per writer, its segments that declare (:meth:`declaring`), as far as looked at."""
    declares: dict[Path, bool] = field(default_factory=dict)
    """Whether a segment's footer lists a declaration (:meth:`_declares`), by path."""
    parsed: dict[str, dict[int, Any]] = field(default_factory=dict)
    """What the rules made of a sealed segment's rows, by path (as the rows name it) and
    sequence number (the committed steps' cells:
    :attr:`~ftaudit.verifier.context.RunContext.committed`): a follower's window holds a
    row for many polls, and it is parsed once."""
    states: dict[type, Any] = field(default_factory=dict)
    """The rules' states kept between polls, by class
    (:class:`~ftaudit.verifier.segment_state.SegmentFed`: each follows the window itself;
    or what a rule found and carries: :meth:`~ftaudit.verifier.context.RunContext.carried`)."""
    listing: SegmentListing | None = None
    """The listing the last :meth:`keep` was given."""
    manifests: dict[tuple[str, str], Any] = field(default_factory=dict)
    """Dataset manifests read and checked, by ``("digest", d)`` or ``("file", path)``
    (:meth:`~ftaudit.verifier.context.RunContext.dataset_manifest`): reading and hashing
    one cost every poll 5 ms."""

    def drop_footers(self) -> None:
        """Forget the parsed footers: each holds about 100 KB of Thrift objects, and a
        follower that kept every listed segment's grew by that for each new segment (116 MB
        at 1,160 segments). A later need of one (a step statistic not looked at yet) parses
        it again."""
        self.metadata.clear()
        self.opened.clear()

    @property
    def footers(self) -> Footers:
        """What the poll can decode its new segments with, by path: the reader of each
        one read whole, else its parsed footer."""
        return {**self.metadata, **self.opened}

    def digest_problem(self, info: SegmentInfo) -> str | None:
        """:func:`~ftaudit.eventlog.reader.digest_problem` of ``info``, hashed once: a
        follower's window holds hundreds of sealed segments, each judged at every poll."""
        if info.path not in self.digests:
            self.digests[info.path] = digest_problem(info)
        return self.digests[info.path]

    def keep(self, listing: SegmentListing) -> None:
        """Forget the segments ``listing`` no longer holds: originals a roll merged (their
        merged segment is listed instead) or files removed since; a long follower's memory
        then follows the listed segments, not every file it ever saw. A listing that holds
        every segment of the last one given forgets nothing (what was cached from another
        listing meanwhile is forgotten at the next listing that loses one)."""
        was, self.listing = self.listing, listing
        if was is not None and listing.added_since(was) is not None:
            return  # nothing listed last time is gone: no walk of the maps (3-4 ms a poll)
        # by name: a path's string is kept, where comparing paths runs Python per pair
        listed = {str(f.path) for f in listing.files}
        for cached in self._by_path():
            gone = [p for p in cached if str(p) not in listed]
            for path in gone:
                del cached[path]
            if gone:
                self.declared.clear()  # positions moved: look again, once

    @property
    def paths(self) -> set[Path]:
        """The segments the cache holds something of."""
        return {Path(path) for cached in self._by_path() for path in cached}

    def _by_path(self) -> tuple[dict[Path, Any] | dict[str, Any], ...]:
        return (
            self.metadata,
            self.opened,
            self.infos,
            self.max_steps,
            self.allocations,
            self.buffer_sizes,
            self.digests,
            self.declares,
            self.steps,
            self.parsed,
        )

    def declaring(self, files: Sequence[SegmentFile], upto: int) -> list[SegmentFile]:
        """Those of one writer's first ``upto`` segments whose footer lists a
        :data:`DECLARATIONS` event.

        Only the segments not looked at before are: a follower's poll looks at those
        sealed since the last one, not at the run's history. Segments are listed in
        sequence order and a sealed one never changes, so what was looked at holds while
        the last segment looked at is still at its place (a segment listed before it
        moves it; a removed one, a roll's original, clears what :meth:`keep` knew).
        """
        if not files:
            return []
        writer = files[0].writer
        known = self.declared.get(writer)
        if (
            known is None
            or known.looked > len(files)
            or (known.last is not None and files[known.looked - 1].path != known.last)
        ):
            known = _Declaring(0, None, ())
        if upto > known.looked:
            new = [j for j in range(known.looked, upto) if self._declares(files[j])]
            known = _Declaring(upto, files[upto - 1].path, (*known.found, *new))
            self.declared[writer] = known
        return [files[j] for j in known.found if j < upto]

    def _declares(self, listed: SegmentFile) -> bool:
        """Whether the segment's footer lists a :data:`DECLARATIONS` event, kept by path:
        a roll moves every later segment's position, and looking again must not read
        again the footers :meth:`release` let go (1,500 of them at step 99,000)."""
        found = self.declares.get(listed.path)
        if found is None:
            found = self.declares[listed.path] = _declares(self.info(listed))
        return found

    def md(self, path: Path) -> pq.FileMetaData:
        """The Parquet footer of ``path``."""
        md = self.metadata.get(path)
        if md is None:
            try:
                md = self.metadata[path] = pq.read_metadata(path)
            except UNREADABLE as exc:
                raise unreadable(path, exc, "not a readable Parquet file") from None
        return md

    def release(self) -> None:
        """Forget the checked footers not asked for since the last call: a follower's
        poll asks for those of its window and of each writer's newest segments, and one
        it asks for again later (a resume moving the window back) is read again.

        Kept, a long follower's footers grew with the run: at step 99,000 of a 16-cell
        run, 1,700 of them held 340,000 parsed parts of merged segments, and Python's
        cycle collector walked them all at each full pass (170 ms; 28 ms a poll in all)."""
        for path in [p for p in self.infos if p not in self._asked]:
            del self.infos[path]
        self._asked = set()

    def info(self, listed: SegmentFile) -> SegmentInfo:
        """The checked footer of ``listed`` (read on first use)."""
        self._asked.add(listed.path)
        found = self.infos.get(listed.path)
        if found is None:
            found, footer = checked_footer(listed, self.checks, digest=self.read_whole)
            self.infos[listed.path] = found
            md = self.metadata.setdefault(listed.path, footer.parsed)
            if footer.opened is not None:
                self.opened[listed.path] = footer.opened
            # while the footer is at hand: it is dropped after the poll
            self.max_steps.setdefault(listed.path, _largest_step(md, found.schema))
        return found

    def max_step(self, path: Path) -> int | None:
        """The largest step in the file (footer statistics), None when it holds no step."""
        if path not in self.max_steps:
            md = self.md(path)
            self.max_steps[path] = _largest_step(md, md.schema.to_arrow_schema())
        return self.max_steps[path]


def _largest_step(md: pq.FileMetaData, schema: pa.Schema) -> int | None:
    """The largest ``step`` of a segment by its footer's statistics (None: it holds none);
    ``schema``: the footer's, as Arrow's."""
    index = schema.get_field_index("step")
    best: int | None = None
    for rg in range(md.num_row_groups):
        stats = md.row_group(rg).column(index).statistics
        if stats is not None and stats.has_min_max:
            best = stats.max if best is None else max(best, stats.max)
    return best


@dataclass
class _File:
    """A listed segment whose footer is read at most once, when first needed."""

    listed: SegmentFile
    cache: FooterCache

    @property
    def path(self) -> Path:
        return self.listed.path

    @property
    def first_seq(self) -> int:
        return self.listed.first_seq

    @property
    def names(self) -> list[str]:
        """The segment's column names (from its checked footer, kept across polls)."""
        return self.cache.info(self.listed).schema.names

    def max_step(self) -> int | None:
        return self.cache.max_step(self.path)

    def allocations(self) -> pa.Table:
        found = self.cache.allocations.get(self.path)
        if found is None:
            found = self.cache.allocations[self.path] = _allocations(self.path, self.names)
        return found

    def buffer_sizes(self) -> list[int]:
        found = self.cache.buffer_sizes.get(self.path)
        if found is None:
            found = self.cache.buffer_sizes[self.path] = _buffer_sizes(self.path, self.names)
        return found

    def cut(self, step: int) -> int | None:
        """Where a merged segment is read from for steps ``>= step``: the row after its
        last one at an earlier step, as :func:`_suffix` walks files (a writer's steps
        only grow; rows with no step after it are kept); None when no row is at an
        earlier step, or the segment is one flush (loaded whole)."""
        if self.listed.last_seq is None:
            return None
        found = self.cache.steps.get(self.path)
        if found is None:
            found = self.cache.steps[self.path] = _seq_steps(self.path)
        seqs, steps = found
        before = seqs[(steps >= 0) & (steps < step)]
        return int(before.max()) + 1 if before.size else None


class _Files(Sequence[_File]):
    """One writer's listed segments as :class:`_File`, each made as the selection asks for
    it: the selection walks a window's suffix of them, and making all of them (1,700 at
    step 99,000) cost a poll 1.5 ms."""

    def __init__(self, listed: Sequence[SegmentFile], cache: FooterCache) -> None:
        self._listed = listed
        self._cache = cache

    def __len__(self) -> int:
        return len(self._listed)

    @overload
    def __getitem__(self, i: int) -> _File: ...

    @overload
    def __getitem__(self, i: slice) -> list[_File]: ...

    def __getitem__(self, i: int | slice) -> _File | list[_File]:
        if isinstance(i, slice):
            return [_File(f, self._cache) for f in self._listed[i]]
        return _File(self._listed[i], self._cache)


def _suffix(files: Sequence[_File], lookback: int) -> int:
    """Index of the first file of the suffix holding every step ``>= lookback``."""
    i = len(files)
    while i > 0:
        top = files[i - 1].max_step()
        if top is not None and top < lookback:
            break
        i -= 1
    return i


def _column(table: pa.Table, name: str) -> pa.ChunkedArray | None:
    return table.column(name) if name in table.column_names else None


def _read(path: Path, columns: list[str]) -> pa.Table:
    # not pq.read_table: it imports pyarrow.dataset, and with it pandas (half a second)
    try:
        return pq.ParquetFile(path).read(columns=columns)
    except UNREADABLE as exc:
        raise unreadable(path, exc, "unreadable") from None


def _allocations(path: Path, names: list[str]) -> pa.Table:
    """(step, start, counter_after) of the allocations in one driver segment."""
    import pyarrow.compute as pc  # --since-step only: ft-verify's plain path never loads it

    cols = [c for c in ("type", "step", _COUNTER, _NUM_IDS) if c in names]
    table = _read(path, cols)
    if _COUNTER not in table.column_names:
        empty = pa.nulls(0, pa.int64())
        return pa.table({"step": empty, "start": empty, "after": empty})
    table = table.filter(pc.equal(table["type"], string_scalar("witness_allocated")))
    after = table[_COUNTER]
    return pa.table(
        {"step": table["step"], "start": pc.subtract(after, table[_NUM_IDS]), "after": after}
    )


def _seq_steps(path: Path) -> tuple[Any, Any]:
    """The ``seq`` and ``step`` columns of one segment, as numpy arrays (no step: -1)."""
    table = _read(path, ["seq", "step"])
    # not ChunkedArray.to_numpy: it imports pandas (0.34 s, paid by a follower at the
    # first roll it saw)
    return int64_numpy(table["seq"]), int64_numpy(table["step"], null=-1)


def _buffer_sizes(path: Path, names: list[str]) -> list[int]:
    """The buffer sizes the ``run_started`` rows of one driver segment declare."""
    import pyarrow.compute as pc  # --since-step only: ft-verify's plain path never loads it

    if _BUFFER not in names:
        return []
    t = _read(path, ["type", _BUFFER])
    t = t.filter(pc.equal(t["type"], string_scalar("run_started")))
    return [v for v in t[_BUFFER].to_pylist() if v]


def _buffer_size(drivers: dict[str, _Files]) -> int | None:
    sizes = [b for files in drivers.values() for b in files[0].buffer_sizes()]
    return sizes[-1] if sizes else None


def _lookback(drivers: dict[str, _Files], since: int) -> int:
    """``T``: the step of the oldest allocation still in the active window at ``since``."""
    import pyarrow.compute as pc  # --since-step only: ft-verify's plain path never loads it

    B = _buffer_size(drivers)
    if B is None:
        return max(since - 1, 0)
    keep = keep_size(B)
    first_new: int | None = None  # the lowest counter position of any step >= since
    loaded: dict[str, list[tuple[int, pa.Table]]] = defaultdict(list)
    for writer, files in drivers.items():
        for i in range(len(files) - 1, _suffix(files, since) - 1, -1):
            t = files[i].allocations()
            loaded[writer].append((i, t))
            new = t.filter(pc.greater_equal(t["step"], int64_scalar(since)))
            if new.num_rows:
                low = pc.min(new["start"]).as_py()
                first_new = low if first_new is None else min(first_new, low)
    if first_new is None:
        return max(since - 1, 0)
    lo = first_new - keep
    lookback = since
    for writer, files in drivers.items():
        i = min((j for j, _ in loaded[writer]), default=len(files))
        tables = [t for _, t in loaded[writer]]
        while True:
            for t in tables:
                inside = t.filter(pc.greater(t["after"], int64_scalar(lo)))
                if inside.num_rows:
                    lookback = min(lookback, pc.min(inside["step"]).as_py())
            # the counter only grows within a writer: stop once a file ends at or below lo
            if i == 0 or any(t.num_rows and pc.max(t["after"]).as_py() <= lo for t in tables):
                break
            i -= 1
            tables = [files[i].allocations()]
    return max(lookback - 1, 0)


def _declares(info: SegmentInfo) -> bool:
    """Whether the segment's footer lists a :data:`DECLARATIONS` event."""
    return any(t in DECLARATIONS for t in info.meta.types)


def select(
    run_dir: str | os.PathLike[str],
    since: int,
    *,
    listing: SegmentListing | None = None,
    cache: FooterCache | None = None,
) -> tuple[RunScan, IncrementalScope]:
    """The segments an incremental verification of steps ``>= since`` must read.

    A follower passes the ``listing`` it just made (and gave its ``cache`` to keep) and
    the ``cache`` of footers it read before, so that a poll reads only the new segments'
    footers.
    """
    cache = cache if cache is not None else FooterCache()
    if listing is None:
        listing = list_segments(run_dir)
        cache.keep(listing)  # the cache follows the listing (a follower keeps its own)
    writers = {w: _Files(files, cache) for w, files in listing.writers.items()}
    drivers = {w: f for w, f in writers.items() if w.startswith("driver.")}
    lookback = _lookback(drivers, since)
    recent = max(since - 1, lookback)
    chosen: list[SegmentInfo] = []
    kept: dict[str, Kept] = {}
    first_seq: dict[str, int] = {}
    partial: set[str] = set()
    last_seq: dict[str, int] = {}
    for writer, files in writers.items():
        last = files[-1]
        last_seq[writer] = cache.info(last.listed).meta.last_seq
        i = _suffix(files, lookback)
        listed = listing.writers[writer]
        before = cache.declaring(listed, i)
        if i and writer in drivers and (not before or before[0] is not listed[0]):
            before.insert(0, listed[0])  # for its run_started
        chosen += [cache.info(f) for f in before]
        kept.update((str(f.path), HEAD_ONLY) for f in before)
        if i == len(files):
            continue
        first_seq[writer] = files[i].first_seq
        chosen += [cache.info(f.listed) for f in files[i:]]
        cuts = _cuts(files, i, lookback, None if writer in drivers else recent)
        kept.update(cuts)
        if cuts:
            partial.add(writer)
    # a merged segment the window left is not cut again (unless a resume moves it back):
    # its columns are not kept, or a long follower would keep every roll's
    for path in [p for p in cache.steps if str(p) not in kept]:
        del cache.steps[path]
    skip = superseded(tuple(chosen))  # a compaction cut short: read its events once
    chosen = [s for s in chosen if s.path not in skip]
    chosen.sort(key=lambda s: (s.meta.writer, s.meta.first_seq))
    total = sum(len(f) for f in writers.values())
    window = IncrementalScope(since, lookback, first_seq, last_seq, kept, total, frozenset(partial))
    return RunScan(listing.run_dir, tuple(chosen), listing.torn), window


def _cuts(files: Sequence[_File], i: int, lookback: int, recent: int | None) -> dict[str, Kept]:
    """What is kept of one writer's segments ``files[i:]`` (those holding steps
    ``>= lookback``), by path; the others are read whole.

    A driver's (``recent`` None) are read whole from ``lookback`` on. Another writer's
    are read whole from ``recent`` (``since - 1``) on, and before it only for the witness
    window (:data:`WINDOW_TYPES`). A merged segment is cut where those steps begin, its
    earlier rows kept only for their :data:`HEAD` rows, as its flushes would be read.
    """
    out: dict[str, Kept] = {}
    j = i if recent is None else _suffix(files, recent)
    for f in files[i:j]:
        out[str(f.path)] = WINDOW_ONLY
    if i < len(files):
        lead = files[i].cut(lookback)
        if lead is not None:  # the window begins inside it
            rows = Kept(head_from=0, window_from=lead) if i < j else Kept(0, None, lead)
            out[str(files[i].path)] = rows
    if recent is not None and j < len(files):
        tail = files[j].cut(recent)
        if tail is not None:  # the whole rows begin inside it
            lead_kept = out.get(str(files[j].path))  # its lead cut when it is files[i]
            head, window = (0, lead_kept.whole_from) if lead_kept else (None, 0)
            out[str(files[j].path)] = Kept(head, window, tail)
    return out
