"""The per-process event writer: buffer in memory, flush sealed segments in the background.

``log`` only appends to a buffer (no I/O, no serialisation), so the training loop is
never stalled by the disk; a flusher thread turns full or old buffers into segments
(a ``log`` call waits only while a flush converts the buffer, which holds the GIL anyway:
see ``EventWriter._freeze``).
``flush`` is the durability point: when it returns, every event logged before it is in
a sealed segment on disk.
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from time import time_ns
from typing import Any

import pyarrow as pa

from ftaudit.errors import UsageError, WriterError
from ftaudit.eventlog.batch import Batch, Rows
from ftaudit.eventlog.context import NO_CONTEXT, StepAttempt, current
from ftaudit.eventlog.events import Event
from ftaudit.eventlog.fallback import fallback_dir, write_last_chance
from ftaudit.eventlog.hot import KINDS, PAIRED, add
from ftaudit.eventlog.identity import Identity
from ftaudit.eventlog.keys import load_key
from ftaudit.eventlog.lost_events import LostEvents
from ftaudit.eventlog.registry import EventRegistry, default_registry
from ftaudit.eventlog.roll import Roller
from ftaudit.eventlog.rundir import segment_path
from ftaudit.eventlog.segment import SegmentMeta, write_atomically
from ftaudit.eventlog.segment_table import build_table

log = logging.getLogger("ftaudit.eventlog")


@dataclass
class WriterStats:
    """Counters a trainer can export; write errors are also visible to the verifier as gaps."""

    segments_written: int = 0
    rolls: int = 0
    """Merged segments the writer sealed from its small ones (see ``roll_segments``)."""
    write_errors: int = 0
    events_dropped: int = 0
    flush_seconds: float = 0.0


@dataclass(frozen=True)
class WriterOptions:
    flush_rows: int = 8192
    """Flush in the background once this many events are buffered."""
    roll_segments: int = 256
    """Seal this many consecutive small segments again as one (or fewer holding
    ``flush_rows`` events), from memory, keeping each one's digest, chain link and MAC in
    the merged footer, and 32 or more left at :meth:`EventWriter.close`; 0: never.
    A writer flushed every step would otherwise leave one file per step, and the verifier
    pays per file (see :mod:`ftaudit.eventlog.roll`)."""
    flush_interval_s: float = 2.0
    """Flush in the background when the oldest buffered event is this old."""
    fsync: bool = True
    """Fsync each segment and its directory; False trades machine-crash safety for speed."""
    fail_closed: bool = False
    """Raise from ``flush``/``log`` when the disk fails, instead of warning and counting."""
    max_buffered: int = 1_000_000
    """Beyond this many unflushable events the oldest are dropped (a visible sequence gap)."""
    fallback_dir: str | None = None
    """Where a writer that lost events leaves its last-chance record at close (default:
    ``$FTAUDIT_FALLBACK_DIR``, else ``<temp dir>/ftaudit-fallback``; see
    :mod:`ftaudit.eventlog.fallback`)."""
    mac_key: bytes | None = field(default=None, repr=False)
    """The run's HMAC key: the writer MACs every segment digest and checkpoint record with it
    (default: ``$FTAUDIT_HMAC_KEY_FILE``, else ``$FTAUDIT_HMAC_KEY``, else no MAC; see
    :mod:`ftaudit.eventlog.keys`). Never shown in a repr or a log."""


def new_writer_id(source: Identity, incarnation: int) -> str:
    """Unique per process lifetime, so a restarted process never reuses a dead one's files."""
    return f"{source.slug()}.i{incarnation}.p{os.getpid()}.{secrets.token_hex(4)}"


class EventWriter:
    """Writes one process's events of one run incarnation as sealed Parquet segments."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        source: Identity,
        *,
        run_id: str,
        incarnation: int,
        options: WriterOptions | None = None,
        registry: EventRegistry = default_registry,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.source = source
        self.run_id = run_id
        self.incarnation = incarnation
        self.options = options or WriterOptions()
        self.registry = registry
        self.writer_id = new_writer_id(source, incarnation)
        self._key = self.options.mac_key if self.options.mac_key is not None else load_key()
        self.stats = WriterStats()
        self._roller = (
            Roller(
                self.run_dir,
                segments=self.options.roll_segments,
                rows=self.options.flush_rows,
                key=self._key,
                fsync=self.options.fsync,
            )
            if self.options.roll_segments > 1
            else None
        )
        self._forked = False  # set in a forked child: its copy must not write as this writer
        self._known: dict[type[Event], bool] = {}
        self._hot: dict[type[Event], tuple[int | None, bool, int]] = {}
        self._explicit = NO_CONTEXT  # the last step and attempt passed to log_fields
        self._lock = threading.Lock()  # guards the buffer and sequence counter
        self._io_lock = threading.Lock()  # one flush at a time, in sequence order
        self._io_owner: int | None = None  # the thread inside a flush (see _on_sigterm)
        self._freezing = False  # a flush converts the buffer under _lock (see _freeze)
        self._buffer = Batch()
        self._buffer_first_seq = 0
        self._flush_at = self.options.flush_rows - 1  # the seq that fills the buffer
        self._next_seq = 0
        self._durable_seq = -1
        self._head: tuple[int, str] = (-1, "")  # (last durable seq, digest of its segment)
        self._dropped_pending = 0  # dropped since the last sealed segment, told in the next
        self._failing = False  # the last write failed (told once it works again)
        self._error: WriterError | None = None  # fail-closed: a background failure for log()
        self._closed = False
        self._warned = False
        self._reported = False  # lost events were reported (stderr, last-chance record)
        self._wake = threading.Event()
        self._thread = threading.Thread(
            target=self._flush_loop, name=f"ftaudit-flush-{self.writer_id}", daemon=True
        )
        self._thread.start()
        _open_writers.add(self)
        _install_exit_hooks()

    @property
    def last_durable_seq(self) -> int:
        """The highest sequence number in a sealed segment; -1 before the first flush."""
        return self._durable_seq

    @property
    def chain_head(self) -> tuple[int, str]:
        """``(last durable seq, digest of the segment ending there)``, read together.

        Each segment's footer records the digest of the writer's previous segment, so the
        digest of the last one vouches for every event before it (``""`` before the first
        flush). A checkpoint records it next to the sequence number.
        """
        return self._head

    def log(self, event: Event) -> int:
        """Buffer ``event`` and return its sequence number. Never blocks on I/O.

        This is on the training loop's path, so it does the least it can: no validation
        beyond a per-class check done once, no serialisation, no allocation, one lock
        (held by others only to swap or convert the buffer). The step context is buffered
        with every event and the flush resolves which of the two each column takes. The
        event's own step and attempt are read only when its type needs them and the
        context lacks them. A pydantic model's class defines ``__getattr__``, which keeps
        CPython off its attribute fast path: reading a field costs 30 to 120 ns here (more
        when the event is out of cache), a context variable about 25 ns. So logging inside
        :func:`~ftaudit.eventlog.context.step_context`, as the hooks do, costs a third less.
        """
        needs_step = self._known.get(type(event))
        if needs_step is None:
            needs_step = self._learn(type(event))
        context = current()
        if (
            needs_step
            and (context.step is None or context.attempt is None)
            and (
                (context.step is None and event.step is None)
                or (context.attempt is None and event.attempt is None)
            )
        ):
            raise UsageError(
                f"{event.type} needs a step and an attempt: set them on the event "
                "or log it inside ftaudit.step_context(step, attempt)"
            )
        if (self._closed or self._forked or self._error is not None) and self._refused():
            return -1
        now = time_ns()
        lock = self._lock
        # not `with`: its two method lookups are a fifth of this call
        mine = lock.acquire(False) or self._enter()
        try:
            seq = self._next_seq
            self._next_seq = seq + 1
            buffer = self._buffer
            buffer.events.append(event)
            buffer.ts_ns.append(now)
            buffer.contexts.append(context)
            full = seq >= self._flush_at
            if full:
                self._flush_at = _WOKEN
        finally:
            if mine:
                lock.release()
        if full:
            self._wake.set()
        return seq

    def log_fields(
        self,
        model: type[Event],
        *values: Any,
        step: int | None = None,
        attempt: int | None = None,
    ) -> int:
        """Log one ``model`` event given its payload field values; return its sequence number.

        The same event as ``log(model(step=step, attempt=attempt, **fields))``, stored
        the same way, without building the model: ``values`` are the payload fields in
        declaration order, every one of them (``EventRegistry[...].fields``). For the
        hot types (:mod:`ftaudit.eventlog.hot`) the values are checked as the model would
        check them and kept as they are until the flush converts them, column by column;
        values the check declines, or any other type, go through the model, which raises
        its own error naming the field. Pass values that do not change afterwards (id
        runs are read at the flush; dicts are copied).
        """
        hot = self._hot.get(model)
        if hot is None:
            hot = self._learn_hot(model)
        kind, needs_step, stored = hot
        if kind is None:
            return self.log(self._build(model, values, step, attempt))
        if step is None and attempt is None:
            context = current()
        else:
            if not (
                (step is None or type(step) is int) and (attempt is None or type(attempt) is int)
            ):
                return self.log(self._build(model, values, step, attempt))
            if step is None or attempt is None:  # the context fills in the other one
                outer = current()
                step = outer.step if step is None else step
                attempt = outer.attempt if attempt is None else attempt
            # a frozen dataclass costs a microsecond to build; callers that pass the step
            # (the driver) pass the same one many times in a row
            explicit = self._explicit
            if explicit.step != step or explicit.attempt != attempt:
                explicit = self._explicit = StepAttempt(step, attempt)
            context = explicit
        if needs_step and (context.step is None or context.attempt is None):
            self._build(model, values, step, attempt)  # a bad value's own error first
            raise UsageError(
                f"{model.model_fields['type'].default} needs a step and an attempt: pass them "
                "or log it inside ftaudit.step_context(step, attempt)"
            )
        if self._closed or self._forked or self._error is not None:
            return self.log(self._build(model, values, step, attempt))  # refused as log()
        now = time_ns()
        lock = self._lock
        mine = lock.acquire(False) or self._enter()
        try:
            seq = self._next_seq
            rows = self._buffer.rows.get(model)
            if rows is None:
                rows = self._buffer.rows[model] = Rows(stored)
            if add(kind, values, rows.values, seq, now, context):
                self._next_seq = seq + 1
                full = seq >= self._flush_at
                if full:
                    self._flush_at = _WOKEN
            else:
                seq = -1
                if not rows.values:
                    del self._buffer.rows[model]
        finally:
            if mine:
                lock.release()
        if seq < 0:  # declined: the model's validation speaks, or converts the values
            return self.log(self._build(model, values, step, attempt))
        if full:
            self._wake.set()
        return seq

    def _enter(self) -> bool:
        """Take the buffer lock that another holds (True); False, without waiting, where
        the caller's own thread holds it converting a flush (:meth:`_freeze`): a finalizer,
        weakref callback or signal handler run there that logs would wait on itself. The
        buffer being converted is no longer ``_buffer``, and no other thread can touch
        ``_buffer`` while this one holds the lock, so the event joins the next flush."""
        if self._freezing and self._io_owner == threading.get_ident():
            return False
        self._lock.acquire()
        return True

    def _learn_hot(self, model: type[Event]) -> tuple[int | None, bool, int]:
        """First ``log_fields`` of a class: its hot kind (None: not hot), step need and how
        many payload values a row stores (a map takes two: :data:`~ftaudit.eventlog.
        hot.PAIRED`). ``add`` checks the number of values."""
        needs_step = self._learn(model)
        width = len(self.registry[model.model_fields["type"].default].fields)
        stored = width + len(PAIRED.get(model, ()))
        self._hot[model] = (KINDS.get(model), needs_step, stored)
        return self._hot[model]

    def _build(
        self, model: type[Event], values: tuple[Any, ...], step: int | None, attempt: int | None
    ) -> Event:
        """``model`` built from ``log_fields``' arguments (its own validation speaks)."""
        names = [name for name, _ in self.registry[model.model_fields["type"].default].fields]
        if len(values) != len(names):
            raise UsageError(
                f"{model.model_fields['type'].default} takes {len(names)} field values "
                f"({', '.join(names)}), got {len(values)}"
            )
        return model(step=step, attempt=attempt, **dict(zip(names, values, strict=True)))

    def _learn(self, cls: type[Event]) -> bool:
        """First event of a class: check it is registered, remember whether it needs a step."""
        if cls.model_fields["type"].default not in self.registry:
            raise UsageError(f"event type {cls.model_fields['type'].default!r} is not registered")
        self._known[cls] = cls.needs_step
        return cls.needs_step

    def flush(self) -> int:
        """Make every event logged so far durable; return the last durable sequence number.

        Called on the thread that is inside this writer's flush (from a finalizer or a
        signal handler run there) it returns at once: the flush under way makes durable
        what was logged before it, and the next one the rest."""
        if self._io_owner == threading.get_ident() or self._forked:
            return self._durable_seq  # a forked child's copy: its events are the parent's
        with self._io_lock:
            self._io_owner = threading.get_ident()
            try:
                started = time.perf_counter()
                frozen = self._freeze()
                if frozen is not None:
                    self._seal(*frozen, started=started)
            finally:
                self._io_owner = None
        if _sigterm_deferred:
            _terminate()
        return self._durable_seq

    def _freeze(self) -> tuple[Batch, int, pa.Table, SegmentMeta] | None:
        """Take the buffer and convert it to the segment's table, holding the buffer lock
        throughout; None when nothing is buffered.

        The conversion holds the GIL except inside each Arrow and numpy call, and a thread
        that gives the GIL up gets it back only when the holder's switch interval (5 ms)
        ends: while a training thread logs in a loop, converting a flush of 8,192 events
        took 5-10x its CPU time (78-86 ms for 13 ms), the flusher fell ever further
        behind and the close converted, encoded and fsynced the backlog on the training
        thread. With the lock held, a thread that logs meanwhile waits, asleep, and the
        conversion runs at its CPU speed; the logging thread spends no more CPU per event,
        and it could not have run while the conversion held the GIL anyway.
        """
        with self._lock:
            batch, first = self._buffer, self._buffer_first_seq
            if not batch:
                return None
            self._buffer, self._buffer_first_seq = Batch(), self._next_seq
            self._flush_at = self._next_seq + self.options.flush_rows - 1
            self._freezing = True
            try:
                table, meta = build_table(
                    batch,
                    first_seq=first,
                    run_id=self.run_id,
                    incarnation=self.incarnation,
                    writer=self.writer_id,
                    source=self.source,
                    registry=self.registry,
                    prev_digest=self._head[1],
                    dropped=self._dropped_pending,
                    key=self._key,
                )
            except BaseException as exc:  # a KeyboardInterrupt too: the batch is requeued
                failure: BaseException | None = exc
            else:
                failure = None
            finally:
                self._freezing = False
        if isinstance(failure, Exception):
            self._failed(batch, first, failure)
            return None
        if failure is not None:
            self._requeue(batch, first)  # not a write failure: nothing counted, nothing lost
            raise failure
        return batch, first, table, meta

    def close(self) -> None:
        """Flush and stop the background thread; report lost events loudly. Idempotent."""
        if self._closed:
            return
        if self._forked:  # the parent's writer, its locks as the fork left them: the parent
            self._closed = True  # writes its events and reports their loss
            return
        try:
            self.flush()
            if self._roller is not None and not self._buffer:  # all durable: roll the tail
                with self._io_lock:
                    self._roller.close()
                    self.stats.rolls = self._roller.rolls
        finally:
            self.report_losses()
        self._closed = True
        self._wake.set()
        _open_writers.discard(self)
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    def report_losses(self) -> LostEvents | None:
        """If events were lost (dropped, or still unwritten), say so on stderr and leave a
        last-chance record in the fallback directory; once per writer. Never raises."""
        with self._lock:
            unflushed = len(self._buffer)
        dropped = self._dropped_pending  # drops a sealed footer already told are in the run
        if (dropped == 0 and unflushed == 0) or self._reported:
            return None
        self._reported = True
        record = LostEvents(
            run_id=self.run_id,
            run_dir=str(self.run_dir),
            writer=self.writer_id,
            logged=self._next_seq,
            durable_seq=self._durable_seq,
            dropped=dropped,
            unflushed=unflushed,
            write_errors=self.stats.write_errors,
        )
        try:
            path = write_last_chance(record, fallback_dir(self.options.fallback_dir))
            where = f"last-chance record {path}"
        except OSError as exc:
            where = f"no last-chance record could be written ({exc.strerror or exc})"
        try:
            sys.stderr.write(
                f"ftaudit: LOST {record.lost} of {record.logged} events of writer "
                f"{self.writer_id} (run {self.run_dir}): {dropped} dropped, {unflushed} never "
                f"written, after {record.write_errors} failed flushes; {where}\n"
            )
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # stderr closed: the record is all that is left
        return record

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _seal(
        self, batch: Batch, first: int, table: pa.Table, meta: SegmentMeta, *, started: float
    ) -> None:
        """Encode, fsync and publish a frozen batch as its segment; on failure requeue it."""
        try:
            path = segment_path(self.run_dir, self.writer_id, first)
            digest = write_atomically(table, path, fsync=self.options.fsync, key=self._key)
        except Exception as exc:
            self._failed(batch, first, exc)
            return
        if self._failing:
            self._failing = False
            log.warning(
                "ftaudit: writing events of %s again after %d failed flushes; %d events "
                "dropped in all",
                self.writer_id,
                self.stats.write_errors,
                self.stats.events_dropped,
            )
        self._dropped_pending = 0
        self._error = None  # the disk recovered: what failed before is durable now
        self._head = (meta.last_seq, digest)
        self._durable_seq = meta.last_seq
        self.stats.segments_written += 1
        if self._roller is not None:  # after the flush is durable: a roll only merges copies
            self._roller.sealed(table, meta, digest, path)
            self.stats.rolls = self._roller.rolls
        self.stats.flush_seconds += time.perf_counter() - started

    def _failed(self, batch: Batch, first: int, exc: Exception) -> None:
        """A flush that could not be converted or written: count it, keep its events in
        memory (dropping the oldest beyond ``max_buffered``), raise when fail-closed, else
        warn once."""
        self.stats.write_errors += 1
        self._failing = True
        self._requeue(batch, first)
        if self.options.fail_closed:
            raise WriterError(
                f"{self.run_dir}: cannot write events of {self.writer_id}: {exc}"
            ) from exc
        if not self._warned:
            self._warned = True
            log.warning(
                "ftaudit: cannot write events of %s to %s (%s); keeping them in memory "
                "and retrying (up to %d events, then the oldest are dropped)",
                self.writer_id,
                self.run_dir,
                exc,
                self.options.max_buffered,
            )

    def _requeue(self, batch: Batch, first: int) -> None:
        with self._lock:
            batch.extend(self._buffer)
            overflow = len(batch) - self.options.max_buffered
            if overflow > 0:
                batch.drop_first(overflow, first)
                first += overflow
                self.stats.events_dropped += overflow
                self._dropped_pending += overflow
            self._buffer, self._buffer_first_seq = batch, first
            self._flush_at = first + self.options.flush_rows - 1

    def _drop(self, count: int, why: str) -> None:
        self.stats.events_dropped += count
        if not self._warned:
            self._warned = True
            log.warning("ftaudit: dropping events of %s: %s", self.writer_id, why)

    def _flush_loop(self) -> None:
        interval = self.options.flush_interval_s
        while not self._closed:
            self._wake.wait(timeout=interval)
            self._wake.clear()
            if self._closed:
                return
            with self._lock:
                oldest = self._buffer.oldest_ns()
                due = oldest is not None and time_ns() - oldest >= interval * 1e9
                full = len(self._buffer) >= self.options.flush_rows
            if due or full:
                try:
                    self.flush()
                except WriterError as exc:
                    self._error = exc  # fail-closed: the next log raises it (flush retries)

    def _refused(self) -> bool:
        """The slow path of ``log``/``log_fields`` on a writer that cannot take the event:
        True (the event dropped and counted) when it is closed or in a forked child; a
        flush error still pending is raised."""
        if self._closed or self._forked:
            self._drop(1, "writer is closed" if self._closed else "writer used in a forked child")
            return True
        self._raise_pending()
        return False

    def _raise_pending(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error


_WOKEN = sys.maxsize
"""``_flush_at`` once a full buffer woke the flusher: the flush that takes the buffer sets
the next threshold (``_freeze``, ``_requeue``, under the buffer lock). Until then no event
wakes it again: ``Event.set`` takes a lock and costs about a microsecond, and the flusher
gets the GIL back only when the logging thread's switch interval ends (5 ms), so every
event logged meanwhile woke it again (95,000 of the 120,000 events of
``benchmarks/eventlog_bench.py``'s durable round)."""

# Writers of this process, flushed at exit and on SIGTERM. Weak, so a dropped writer is
# not kept alive by this bookkeeping.
_open_writers: weakref.WeakSet[EventWriter] = weakref.WeakSet()
_hooks_installed = False


def flush_all() -> None:
    """Flush every open writer of this process (at exit, on SIGTERM, at a checkpoint)."""
    for writer in list(_open_writers):
        try:
            writer.flush()
        except Exception as exc:  # at exit nothing may raise past here
            log.warning("ftaudit: final flush of %s failed: %s", writer.writer_id, exc)


def _at_exit() -> None:
    """The last flush of every open writer, and the report of whatever could not be."""
    flush_all()
    for writer in list(_open_writers):
        writer.report_losses()


_sigterm_deferred = False
"""A SIGTERM arrived while this process's main thread held a writer's lock; the flush that
ends next terminates the process."""


def _on_sigterm(signum: int, frame: object) -> None:
    global _sigterm_deferred
    # The handler runs in the main thread between two bytecodes, possibly inside that
    # thread's own flush or log(): flushing then would wait on a lock its holder cannot
    # release. Let the interrupted call finish; the next flush to end terminates.
    if any(_held_here(writer) for writer in list(_open_writers)):
        _sigterm_deferred = True
        return
    _terminate()


def _held_here(writer: EventWriter) -> bool:
    """Whether the calling thread holds one of ``writer``'s locks. A logging thread holds
    the buffer lock only for a few instructions, so a second's wait tells them apart; a
    flush holds it while it converts the buffer (``_freezing``), and a flush is then under
    way in another thread (the calling thread's own is told by ``_io_owner``)."""
    if writer._io_owner == threading.get_ident():
        return True
    if not writer._lock.acquire(timeout=1.0):
        return not writer._freezing
    writer._lock.release()
    return False


def _terminate() -> None:
    """Flush every writer, then die of SIGTERM as the process would have without us."""
    global _sigterm_deferred
    _sigterm_deferred = False  # the flushes below end too
    flush_all()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def _disown_after_fork() -> None:
    # The child inherits writer objects but not their flusher threads; writing under the
    # parent's writer id would interleave two sequences in one name.
    for writer in list(_open_writers):
        writer._forked = True
    _open_writers.clear()


def _install_exit_hooks() -> None:
    global _hooks_installed
    if _hooks_installed:
        return
    _hooks_installed = True
    # pyarrow imports pandas the first time it converts Python values, and pandas then
    # registers exit hooks of its own: at exit (a final flush after no earlier one) that
    # import fails ("can't register atexit after shutdown") and the flush is lost. So the
    # first conversion happens now.
    pa.array([0])
    atexit.register(_at_exit)
    os.register_at_fork(after_in_child=_disown_after_fork)
    if threading.current_thread() is threading.main_thread():
        if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
