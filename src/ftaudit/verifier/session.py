"""One verification's DuckDB session: the only place the verifier executes SQL.

The session owns its connection (never DuckDB's module-level default), loads the run's
segments into memory once, and funnels every query through :meth:`Session.query`, which
binds parameters, times the query and turns ``duckdb.Error`` into an ftaudit error.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from ftaudit.errors import (
    CorruptSegmentError,
    QueryError,
    UnknownEventTypeError,
    UnusableInputError,
)
from ftaudit.eventlog.arrays import int64_array, int64_scalar, string_array, string_scalar
from ftaudit.eventlog.connections import open_memory
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.load import FILENAME, Footers, conformed_batches, new_columns, untyped_row
from ftaudit.eventlog.reader import RunScan, SegmentInfo, scan_run
from ftaudit.eventlog.registry import EventRegistry, default_registry
from ftaudit.eventlog.rundir import SegmentListing, relisting
from ftaudit.eventlog.sql import ident
from ftaudit.eventlog.type_tables import RunTables, delete_below, table_of
from ftaudit.eventlog.views import create_views, lock_down, widen
from ftaudit.eventlog.window_tables import WindowTables
from ftaudit.verifier.incremental import HEAD, HEAD_ONLY, WHOLE, WINDOW_ONLY, WINDOW_TYPES, Kept
from ftaudit.verifier.result_rows import row_maker
from ftaudit.verifier.validation import check_footers_list, check_rows, suspect_rows
from ftaudit.verifier.views import create_history_views, keep_history


def check_types(scan: RunScan, registry: EventRegistry) -> None:
    """Refuse a run holding an event type with no registered model: its meaning is unknown."""
    for info in scan.segments:
        for name in info.meta.types:
            if name not in registry:
                raise UnknownEventTypeError(
                    f"{info.path}: event type {name!r} is not registered "
                    "(import the module that registers it, or upgrade ftaudit)"
                )


ONE_THREAD_ROWS = 100_000
"""A session over fewer rows runs DuckDB on one thread: its queries take longer to plan
than to run, and a second thread only adds hand-offs (8-10% of ``ft-verify``'s CPU on
runs of 256 and 10,000 events, and no longer a wall time, measured at load 12). The
choice is fixed once the session's configuration is locked; a session moved along a live
run (:meth:`Session.move`) that outgrew it is opened again, so a follower that attached
to a still-small run gets DuckDB's threads once its window grew (once: a session on all
threads keeps them when its window shrinks)."""


def _one_thread(scan: RunScan, partial: Mapping[str, Kept]) -> bool:
    """Whether a session over ``scan``'s segments (of those in ``partial``, the kept rows)
    runs DuckDB on one thread."""
    rows = sum(_rows_kept(info, partial.get(str(info.path))) for info in scan.segments)
    return rows < ONE_THREAD_ROWS


def _rows_kept(info: SegmentInfo, kept: Kept | None) -> int:
    """About how many of a segment's rows a session loads: all, or of one kept in part
    the share of its sequence numbers from where its window rows start (its head rows
    before that are few). Counting every row of a merged segment a late window keeps a
    few rows of (8,166 a writer at step 1,280) had a follower that attached with one
    thread open its window again at the writers' first roll."""
    if kept is None:
        return info.num_rows
    froms = [f for f in (kept.whole_from, kept.window_from) if f is not None]
    if not froms:
        return 0
    first, last = info.meta.first_seq, info.meta.last_seq
    span = last - first + 1
    return info.num_rows * min(span, max(0, last - min(froms) + 1)) // span


@dataclass
class QueryTiming:
    """How long one named query took; the session keeps them for profiling."""

    label: str
    seconds: float
    rows: int


@dataclass
class Session:
    """A DuckDB connection over one run, with the event-log and history views."""

    scan: RunScan
    con: duckdb.DuckDBPyConnection
    tables: RunTables
    """The loaded run's columns and the event types with a table."""
    registry: EventRegistry = default_registry
    timings: list[QueryTiming] = field(default_factory=list)
    _partial: dict[str, Kept] = field(default_factory=dict)
    """Segments of which only some rows are loaded: path -> which (the others: whole)."""
    _cut: frozenset[str] | None = None
    """:attr:`cut` (made on first use, again after a move)."""
    _holding: dict[str, frozenset[str]] | None = None
    """:meth:`segments_holding` by event type, for the loaded segments (made on first use,
    again after a move)."""
    one_thread: bool = False
    """Whether DuckDB runs on one thread (:data:`ONE_THREAD_ROWS`)."""
    added: pa.Table | None = None
    """The rows the last :meth:`move` added, as Arrow decoded them (None: none, or the
    session opened since): :meth:`added_rows` reads them without a query."""
    _added_from: frozenset[str] = frozenset()
    """The segments (paths) :attr:`added` holds the loaded rows of."""
    _added_masks: dict[str, pa.ChunkedArray] = field(default_factory=dict)
    """Which of :attr:`added`'s rows are of each event type :meth:`added_rows` was asked
    for."""
    _memo: dict[tuple[str, tuple[Any, ...]], tuple[frozenset[str], list[dict[str, Any]]]] = field(
        default_factory=dict
    )
    """:meth:`rows` asked with ``reads``: (sql, params) -> (reads, rows), until a move
    changes the rows of one of those types."""
    _incarnations: set[int] | None = None
    """:meth:`incarnations_loaded` (asked on first use, then grown by each move)."""
    _window: WindowTables | None = None
    """The loaded rows, held as Arrow from the first :meth:`move` on
    (:mod:`~ftaudit.eventlog.window_tables`)."""

    @classmethod
    def open(
        cls,
        run_dir: str | os.PathLike[str],
        *,
        registry: EventRegistry = default_registry,
        scan: RunScan | None = None,
        listing: SegmentListing | None = None,
        kept: Mapping[str, Kept] | None = None,
    ) -> Session:
        """Scan and check the run, then load its segments; raises ``UnusableInputError``.

        An incremental verification passes the ``scan`` of the segments it needs and
        which rows of some of them are ``kept`` (path -> :class:`Kept`; the others are
        loaded whole); a segment of a given ``scan`` that is gone raises
        :class:`SegmentVanishedError` (the caller selects again). Without one, the session
        lists the run itself (first from ``listing`` when given) and lists it again when a
        writer's roll or a compaction removed a listed segment before it was loaded (see
        :func:`scan_run`).
        """
        partial = dict(kept or {})
        if scan is not None:
            return cls._load(scan, registry, partial)
        given = [listing] if listing is not None else []

        def read() -> Session:
            found = scan_run(run_dir, listing=given.pop() if given else None, digests=True)
            return cls._load(found, registry, partial)

        return relisting(read)

    @classmethod
    def _load(cls, scan: RunScan, registry: EventRegistry, partial: dict[str, Kept]) -> Session:
        check_types(scan, registry)
        con = open_memory()
        one = _one_thread(scan, partial)
        try:
            if one:
                con.execute("SET threads = 1")
            tables = create_views(con, scan, registry, manifests=False)  # FT008 reads them
            infos = {str(i.path): i for i in scan.segments}
            cuts = {p: (WHOLE, k) for p, k in partial.items() if k != WHOLE}
            drops = _drops(tables, infos, cuts)
            if drops is not None:
                delete_below(con, drops)
            check_rows(con, registry, tables, footers={str(i.path): i.meta for i in scan.segments})
            create_history_views(con)
            keep_history(con)
            lock_down(con)  # the rules' SQL needs no file: nothing a segment says can reach one
        except CorruptSegmentError:
            con.close()
            raise
        except duckdb.Error as exc:
            con.close()
            raise CorruptSegmentError(
                scan.run_dir, f"segments cannot be read: {_one_line(exc)}"
            ) from None
        return cls(scan, con, tables, registry, _partial=partial, one_thread=one)

    @property
    def schema(self) -> pa.Schema:
        """The loaded run's columns: what segments added later (:meth:`move`) may hold."""
        return self.tables.schema

    def move(
        self,
        scan: RunScan,
        *,
        kept: Mapping[str, Kept] | None = None,
        footers: Footers | None = None,
    ) -> bool:
        """Make the loaded rows those of ``scan`` (of the ``kept`` segments, only those
        rows, as in :meth:`open`), reading only the segments not loaded yet (``footers``:
        those parsed before, by path); an online verifier's window moving along a live
        run. A loaded segment of which fewer rows are kept now loses the others; a column
        the new segments bring is added to the table (a writer's first roll merges its
        first flushes, whose columns a late window may not hold: opening the session
        again cost that poll 1.5 s). Returns False, changing nothing, when a new segment
        types a column otherwise than the table or a loaded segment is now needed with
        rows it was loaded without: the caller opens a new session. Raises
        ``UnusableInputError`` as :meth:`open` does.
        """
        self.added, self._added_from, self._added_masks = None, frozenset(), {}
        loaded = {str(i.path) for i in self.scan.segments}
        wanted = {str(i.path): i for i in scan.segments}
        fresh = tuple(i for i in scan.segments if str(i.path) not in loaded)
        new = RunScan(scan.run_dir, fresh, ())
        partial = dict(kept or {})
        shrunk: dict[str, Kept] = {}  # loaded segments of which fewer rows are kept now
        for path in loaded & (self._partial.keys() | partial.keys()):
            was, now = self._partial.get(path, WHOLE), partial.get(path, WHOLE)
            if path in wanted and was != now:
                if not was.covers(now, wanted[path].meta.types):
                    return False  # rows it was loaded without
                shrunk[path] = now
        gone = loaded - wanted.keys()
        outgrown = self.one_thread and not _one_thread(scan, partial)  # threads are locked
        added = new_columns(new, self.schema)
        if added is None or outgrown:
            return False
        check_types(new, self.registry)
        types = {t for info in new.segments for t in info.meta.types} - self.tables.types
        try:
            if self._window is None:
                self._window = WindowTables.adopt(self.con, self.tables)
            window = self._window
            if added or types:
                self.tables = widen(self.con, scan, self.registry, self.tables, added, types)
                window.widen(self.tables)
            staged = {p: k for p, k in partial.items() if p not in loaded}
            rows = self._stage(new, staged, footers) if new.segments else None
            infos = {str(i.path): i for i in self.scan.segments}
            cuts = {p: (self._partial.get(p, WHOLE), shrunk.get(p)) for p in gone | shrunk.keys()}
            masks: dict[str, pa.ChunkedArray] = {}
            if rows is not None:
                masks = {t: _of_type(rows, t) for t in _types_of(new, wanted.keys())}
            appended = window.move(_drops(self.tables, infos, cuts), rows, masks)
            if rows is not None and appended != rows.num_rows:
                raise AssertionError("rows of a checked segment went missing")
            self._added_masks = masks
            held = _holding(scan, partial)
            was = self._held()
            changed = {t for t in held.keys() | was.keys() if held.get(t) != was.get(t)}
            changed |= _cut_types(wanted, self._partial, shrunk)
            if changed:  # the types whose rows came or went: so may the history made of them
                keep_history(self.con, changed)
                self._memo = {k: v for k, v in self._memo.items() if not v[0] & changed}
        except duckdb.Error as exc:
            raise CorruptSegmentError(
                scan.run_dir, f"segments cannot be read: {_one_line(exc)}"
            ) from None
        self.scan = scan
        self._partial, self._cut = partial, None
        self._holding = held
        if rows is not None:
            self.added, self._added_from = rows, frozenset(str(i.path) for i in new.segments)
            if self._incarnations is not None:
                self._incarnations.update(_values(rows, "incarnation"))
        return True

    def incarnations_loaded(self) -> frozenset[int]:
        """Every incarnation a loaded row names, and perhaps some whose rows left the
        window since (a superset: a move adds the new rows' and removes none). Asked of
        DuckDB once; a follower's poll then knows without a scan of every event type
        whether each loaded row's incarnation logged a start."""
        if self._incarnations is None:
            found = self.rows(
                "SELECT DISTINCT incarnation FROM events", label="incarnations loaded"
            )
            self._incarnations = {r["incarnation"] for r in found} - {None}
        return frozenset(self._incarnations)

    @property
    def added_segments(self) -> frozenset[str]:
        """The segments (paths) the last :meth:`move` read: a follower's newly sealed ones
        (none after :meth:`open`)."""
        return self._added_from

    def rows_from(self, segment: str, event_type: str) -> int | None:
        """The sequence number from which ``segment``'s loaded ``event_type`` rows run
        (0: all of them; None: none); a rule state built from its rows when they ran from
        elsewhere is stale (:meth:`~ftaudit.verifier.segment_state.SegmentFed.sync`)."""
        return self._partial.get(segment, WHOLE).start(event_type)

    @property
    def cut(self) -> frozenset[str]:
        """The loaded segments whose rows of some type run from a later row than their
        first (merged segments the window begins inside: :func:`select`)."""
        if self._cut is None:
            self._cut = frozenset(p for p, k in self._partial.items() if k not in _PLAIN)
        return self._cut

    def added_rows(
        self, event_type: str, columns: Sequence[str], segments: Collection[str]
    ) -> list[dict[str, Any]] | None:
        """The ``columns`` of ``event_type``'s view, and ``segment``, of the loaded rows of
        ``segments``, read from the rows the last :meth:`move` added (:attr:`added`);
        None where those are not the rows of every one of ``segments``.

        A follower's rule state (:class:`~ftaudit.verifier.segment_state.SegmentFed`) is
        fed the segments new to its window: asking DuckDB for their rows cost a poll a
        query each (planning one costs milliseconds however few rows it finds). The
        values are those the view's query gives, but for maps (pairs, not a dict).
        """
        import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

        added = self.added
        if added is None or not self._added_from.issuperset(segments):
            return None
        mask = self._added_masks.get(event_type)
        if mask is None:
            mask = self._added_masks[event_type] = _of_type(added, event_type)
        if not self._added_from.intersection(self.segments_holding(event_type)) <= set(segments):
            # some added segment holding the type is not asked for: leave its rows out
            inside = pc.is_in(added[FILENAME], value_set=string_array(sorted(segments)))
            mask = pc.and_(mask, inside)
        present = set(added.column_names)  # a list built at each access: read it once
        arrays = []
        for name in columns:
            column = name if name in ENVELOPE_COLUMNS else f"{event_type}.{name}"
            arrays.append(added[column] if column in present else pa.nulls(added.num_rows))
        arrays.append(added[FILENAME])
        # the columns asked for, then the rows: filtering every column of the run cost
        # each call most of a millisecond
        rows = pa.Table.from_arrays(arrays, names=[*columns, "segment"]).filter(mask)
        return rows.to_pylist()

    def _stage(
        self,
        new: RunScan,
        partial: dict[str, tuple[str, ...]],
        footers: Footers | None = None,
    ) -> pa.Table:
        """``new``'s rows in the loaded table's columns (of ``partial`` segments, only the
        kept types' rows), checked before they join it.

        The checks run on the decoded rows (:func:`suspect_rows`); only where they find a
        possible problem are the rows loaded into :data:`_INCOMING` and checked by
        :func:`check_rows`, the judge whose message is reported: planning its statement
        over them cost every poll 25-32 ms of CPU, and checking them among the window's
        rows a scan of the whole window per event type.
        """
        batches = conformed_batches(new, self.schema, footers, _trimming(partial))
        rows = pa.Table.from_batches(list(batches), self.schema)
        # not Table.group_by: it imports pyarrow.dataset, and with it pandas (0.4 s)
        pairs = set(zip(rows[FILENAME].to_pylist(), rows["type"].to_pylist(), strict=True))
        check_footers_list(pairs, {str(i.path): i.meta for i in new.segments})
        untyped = next((path for path, name in sorted(pairs, key=str) if name is None), None)
        if untyped is not None:
            raise untyped_row(untyped)
        if suspect_rows(rows, self.registry, self._rings(rows)):
            self.con.register(_NEW_ROWS, rows)
            try:
                self.con.execute(f"CREATE TEMP TABLE {_INCOMING} AS SELECT * FROM {_NEW_ROWS}")
                check_rows(self.con, self.registry, self.tables, _INCOMING)
            finally:  # only where they were made: a statement a poll otherwise
                self.con.unregister(_NEW_ROWS)
                self.con.execute(f"DROP TABLE IF EXISTS {_INCOMING}")
        return rows

    def _rings(self, rows: pa.Table) -> dict[int, int]:
        """Each incarnation's ring size, as :func:`check_rows` joins them: the largest
        buffer size of its ``run_started`` rows, the loaded ones and ``rows``'."""
        import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

        if _BUFFER not in self.schema.names:
            return {}
        found = []
        if "run_started" in self.tables.types:
            loaded = self.rows(
                f"SELECT incarnation, {ident(_BUFFER)} AS size "
                f"FROM {ident(table_of('run_started'))}",
                label="ring sizes",
                reads=("run_started",),
            )
            found = [(r["incarnation"], r["size"]) for r in loaded]
        started = rows.filter(pc.equal(rows["type"], string_scalar("run_started")))
        found += zip(started["incarnation"].to_pylist(), started[_BUFFER].to_pylist(), strict=True)
        rings: dict[int, int] = {}
        for incarnation, size in found:
            if incarnation is not None and size is not None:
                rings[incarnation] = max(size, rings.get(incarnation, size))
        return rings

    @property
    def run_dir(self) -> Path:
        return self.scan.run_dir

    def query(self, sql: str, params: Sequence[Any] = (), *, label: str = "") -> pa.Table:
        """Run ``sql`` with bound ``params`` and return the result as an Arrow table."""
        started = time.perf_counter()
        with self._translated(label):
            relation = self.con.sql(sql, params=list(params) or None)
            table = relation.to_arrow_table() if relation is not None else pa.table({})
        self.timings.append(QueryTiming(label, time.perf_counter() - started, table.num_rows))
        return table

    def batches(
        self, sql: str, params: Sequence[Any] = (), *, label: str = "", rows: int = 4096
    ) -> Iterator[pa.RecordBatch]:
        """Like :meth:`query`, as Arrow record batches of at most ``rows`` rows, read
        as they are consumed: a large result is never held whole on the Python side."""
        started = time.perf_counter()
        count = 0
        with self._translated(label):
            relation = self.con.sql(sql, params=list(params) or None)
            if relation is not None:
                for batch in relation.to_arrow_reader(rows):
                    count += batch.num_rows
                    yield batch
        self.timings.append(QueryTiming(label, time.perf_counter() - started, count))

    def rows(
        self,
        sql: str,
        params: Sequence[Any] = (),
        *,
        label: str = "",
        needs: Collection[str] = (),
        reads: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Like :meth:`query`, as a list of dicts (for small results only).

        The statement is planned once (see :mod:`ftaudit.verifier.result_rows`); a result
        with a column whose Python value Arrow gives otherwise is read through
        :meth:`query`. ``needs``: event types every row of ``sql`` is made from; when one
        of them has no loaded row the result is empty and is not asked for (planning a
        rule's query costs a small run milliseconds, whatever it finds). ``reads``: every
        event type ``sql`` reads (through the views too); the result is then kept until a
        :meth:`move` changes the rows of one of them (a follower's poll asked again of the
        starts and the manifests, which a live run rarely adds to). The rows returned
        are the caller's to read, not to change.
        """
        if needs and not all(self.holds(t) for t in needs):
            return []
        if reads is not None:
            key = (sql, tuple(params))
            if key not in self._memo:
                self._memo[key] = (frozenset(reads), self.rows(sql, params, label=label))
            return list(self._memo[key][1])
        started = time.perf_counter()
        with self._translated(label):
            cursor = self.con.execute(sql, list(params) or None)
            description = cursor.description
            fetched = cursor.fetchall() if description else []  # a result must be read out
        make = row_maker(description) if description else None
        if description and make is None:
            return self.query(sql, params, label=label).to_pylist()
        rows = make(fetched) if make is not None else []
        self.timings.append(QueryTiming(label, time.perf_counter() - started, len(rows)))
        return rows

    def segments_holding(self, event_type: str) -> frozenset[str]:
        """The loaded segments (paths) whose ``event_type`` rows are loaded: those whose
        footer lists the type, less the ones loaded in part without it. A footer lists the
        types its rows hold and no other (the load refuses a segment holding a type its
        footer leaves out: :func:`~ftaudit.verifier.validation.check_rows`)."""
        return self._held().get(event_type, frozenset())

    def _held(self) -> dict[str, frozenset[str]]:
        if self._holding is None:
            self._holding = _holding(self.scan, self._partial)
        return self._holding

    def holds(self, event_type: str) -> bool:
        """Whether any loaded row is an ``event_type`` event (from the footers: a scan of
        the loaded table per move cost a follower's poll 6 ms)."""
        return bool(self.segments_holding(event_type))

    @contextmanager
    def _translated(self, label: str) -> Iterator[None]:
        """DuckDB's errors as ftaudit's: unreadable input, or a failed query named ``label``."""
        try:
            yield
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            raise UnusableInputError(
                f"{self.run_dir}: cannot read the run: {_one_line(exc)}"
            ) from None
        except duckdb.Error as exc:
            raise QueryError(f"{label or 'query'} failed: {_one_line(exc)}") from exc

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_INCOMING = "_incoming"
"""A moved session's new rows, checked by :func:`check_rows` before they join the
run's tables (where :func:`suspect_rows` found a possible problem)."""

_NEW_ROWS = "_incoming_rows"
"""The same rows, as the Arrow table DuckDB reads them from."""

_BUFFER = "run_started.buffer_size"


_PLAIN = (HEAD_ONLY, WINDOW_ONLY)
"""What is kept of a segment before the window: some types' rows, from its first."""


def _trimming(partial: Mapping[str, Kept]) -> Callable[[SegmentInfo, pa.Table], pa.Table]:
    """What is kept of each segment's decoded rows: of one in ``partial``, only the rows
    its :class:`Kept` names (:func:`_keep` on Arrow rows), dropped as each is decoded: a
    roll's merged segment holds 1,280 steps, and widening and joining all of its rows
    before dropping most cost a follower's poll at a roll about half a second."""

    def trim(info: SegmentInfo, rows: pa.Table) -> pa.Table:
        kept = partial.get(str(info.path), WHOLE)
        if kept == WHOLE:
            return rows
        keep = _kept_mask(rows, kept)
        return rows.slice(0, 0) if keep is None else rows.filter(keep)

    return trim


def _kept_mask(rows: pa.Table, kept: Kept) -> pa.ChunkedArray | None:
    """Which of one segment's ``rows`` ``kept`` names (None: none of them)."""
    import pyarrow.compute as pc

    seq = rows["seq"]
    # the bounds as Arrow scalars: a Python int in a compute call goes through
    # pyarrow's shim, which imports pandas (0.33 s of a follower's poll at a roll)
    keep = (
        pc.greater_equal(seq, int64_scalar(kept.whole_from))
        if kept.whole_from is not None
        else None
    )
    for types, since in ((WINDOW_TYPES, kept.window_from), (HEAD, kept.head_from)):
        if since is not None:
            mask = pc.is_in(rows["type"], value_set=string_array(types))
            if since > 0:
                mask = pc.and_(mask, pc.greater_equal(seq, int64_scalar(since)))
            keep = mask if keep is None else pc.or_(keep, mask)
    return keep


def _holding(scan: RunScan, partial: Mapping[str, Kept]) -> dict[str, frozenset[str]]:
    """Per event type, the segments of ``scan`` whose rows of it are loaded (``partial``:
    those loaded in part, with what is kept), by their footers, in one pass for every
    type: a follower's window holds about a thousand segments. A segment cut inside is
    taken to hold every type its footer lists from there on (a rule asks DuckDB, and
    finds none)."""
    holding: dict[str, set[str]] = {}
    # most segments share their types and what is kept of them: each pair judged once
    held_of: dict[tuple[Kept | None, tuple[str, ...]], tuple[str, ...]] = {}
    for info in scan.segments:
        path = str(info.path)
        kept = partial.get(path)
        key = (kept, info.meta.types)
        names = held_of.get(key)
        if names is None:
            names = held_of[key] = tuple(
                n for n in info.meta.types if kept is None or kept.start(n) is not None
            )
        for name in names:
            holding.setdefault(name, set()).add(path)
    return {name: frozenset(paths) for name, paths in holding.items()}


def _cut_types(
    infos: Mapping[str, SegmentInfo], was: Mapping[str, Kept], shrunk: Mapping[str, Kept]
) -> set[str]:
    """The event types of which a ``shrunk`` segment holds fewer rows now, and some still
    (``infos``: the segments by path)."""
    out: set[str] = set()
    for path, now in shrunk.items():
        before = was.get(path, WHOLE)
        types = infos[path].meta.types
        out.update(t for t in types if now.start(t) not in (None, before.start(t)))
    return out


def _drops(
    tables: RunTables,
    infos: Mapping[str, SegmentInfo],
    cuts: Mapping[str, tuple[Kept, Kept | None]],
) -> pa.Table | None:
    """Of each loaded segment in ``cuts`` (path -> what was kept of it, what is kept now;
    None: nothing, it left the window), the rows no longer kept, as
    :func:`~ftaudit.eventlog.type_tables.delete_below` takes them (``infos``: the loaded
    segments by path); None: none. Only the types whose kept rows start later now."""
    drops: dict[str, list[Any]] = {"type": [], FILENAME: [], "below": []}
    for path, (was, now) in cuts.items():
        for name in infos[path].meta.types:
            before = was.start(name)
            after = now.start(name) if now is not None else None
            if name not in tables.types or before is None:
                continue  # none of its rows were loaded
            if after is not None and after <= before:
                continue  # every row loaded is still kept
            drops["type"].append(name)
            drops[FILENAME].append(path)
            drops["below"].append(after)
    if not drops["type"]:
        return None
    below = drops["below"]
    nulls = np.array([b is None for b in below], dtype=bool)
    # built from buffers: pa.array of Python ints goes through pyarrow's pandas shim
    return pa.table(
        [
            string_array(drops["type"]),
            string_array(drops[FILENAME]),
            int64_array(np.array([b or 0 for b in below], np.int64), nulls),
        ],
        names=["type", FILENAME, "below"],
    )


def _of_type(rows: pa.Table, event_type: str) -> pa.ChunkedArray:
    """Which of ``rows`` are of ``event_type``."""
    import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

    return pc.equal(rows["type"], string_scalar(event_type))


def _types_of(scan: RunScan, paths: Collection[str]) -> set[str]:
    """The event types the footers of ``scan``'s segments ``paths`` list."""
    return {t for info in scan.segments if str(info.path) in paths for t in info.meta.types}


def _values(rows: pa.Table, column: str) -> set[Any]:
    """The distinct non-null values of ``rows``' ``column``."""
    import pyarrow.compute as pc  # a follower's only: ft-verify's plain path never loads it

    return set(pc.unique(rows[column]).to_pylist()) - {None}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
