"""When events become durable: row count, interval, explicit flush, close, exit, SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ftaudit.errors import UnusableInputError
from ftaudit.eventlog import EventWriter, Metric, Trainer, WriterOptions, read_records, scan_run


def _writer(run_dir: Path, **options: object) -> EventWriter:
    return EventWriter(
        run_dir,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="r",
        incarnation=0,
        options=WriterOptions(fsync=False, **options),  # type: ignore[arg-type]
    )


def _count(run_dir: Path) -> int:
    try:
        return len(read_records(run_dir))
    except UnusableInputError:
        return 0


def _wait_for(predicate, timeout: float = 120.0) -> bool:
    """Poll until ``predicate`` holds; the generous timeout only bounds a broken flusher."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_log_buffers_without_writing(tmp_path: Path):
    writer = _writer(tmp_path, flush_rows=1000, flush_interval_s=3600)
    writer.log(Metric(values={"a": 1.0}))
    assert _count(tmp_path) == 0
    assert writer.last_durable_seq == -1
    assert writer.flush() == 0
    assert _count(tmp_path) == 1
    writer.close()


def test_flush_on_row_count(tmp_path: Path):
    writer = _writer(tmp_path, flush_rows=50, flush_interval_s=3600)
    for _ in range(120):
        writer.log(Metric(values={"a": 1.0}))
    assert _wait_for(lambda: _count(tmp_path) >= 100)
    writer.close()
    assert _count(tmp_path) == 120


def test_flush_on_interval(tmp_path: Path):
    writer = _writer(tmp_path, flush_rows=10**6, flush_interval_s=0.05)
    writer.log(Metric(values={"a": 1.0}))
    assert _wait_for(lambda: _count(tmp_path) == 1)
    writer.close()


def test_close_is_idempotent_and_later_logs_are_counted_as_dropped(tmp_path: Path):
    writer = _writer(tmp_path)
    writer.log(Metric(values={"a": 1.0}))
    writer.close()
    writer.close()
    assert writer.log(Metric(values={"a": 2.0})) == -1
    assert writer.stats.events_dropped == 1
    assert _count(tmp_path) == 1


TEN_BUFFERED = textwrap.dedent(
    """
    import os, signal, sys, time
    from ftaudit.eventlog import EventWriter, Metric, Trainer, WriterOptions
    w = EventWriter(sys.argv[1], Trainer(cell_index=0, rank_within_cell=0), run_id="r",
                    incarnation=0, options=WriterOptions(fsync=False, flush_rows=10**6,
                    flush_interval_s=3600))
    for i in range(10):
        w.log(Metric(values={"i": float(i)}))
    """
)
"""A child's start: ten events logged, none flushed (no row count or interval reached)."""

CHILD = TEN_BUFFERED + textwrap.dedent(
    """
    print("ready", flush=True)
    if sys.argv[2] == "wait":
        time.sleep(60)
    """
)


def test_exit_without_close_flushes(tmp_path: Path):
    subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), "exit"], check=True)
    assert _count(tmp_path) == 10


def test_sigterm_flushes_then_terminates(tmp_path: Path):
    with subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), "wait"], stdout=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == -signal.SIGTERM
    assert _count(tmp_path) == 10


MID_FLUSH_CHILD = TEN_BUFFERED + textwrap.dedent(
    """
    from ftaudit.eventlog import writer as writer_module

    convert = writer_module.build_table

    def term_then_convert(batch, **kwargs):
        # delivered to this (main) thread at its next instruction: inside the flush,
        # which holds both of the writer's locks while it converts the buffer
        os.kill(os.getpid(), signal.SIGTERM)
        return convert(batch, **kwargs)

    writer_module.build_table = term_then_convert
    w.flush()
    time.sleep(60)
    print("survived", flush=True)
    """
)


def test_sigterm_inside_a_flush_finishes_it_then_terminates(tmp_path: Path):
    """A SIGTERM that lands while the main thread is inside its own flush must not wait on
    the lock that thread holds (it hung for good before)."""
    with subprocess.Popen(
        [sys.executable, "-c", MID_FLUSH_CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    ) as proc:
        try:
            assert proc.wait(timeout=120) == -signal.SIGTERM
        finally:
            proc.kill()
    assert _count(tmp_path) == 10


HANDLER_LOGS_CHILD = TEN_BUFFERED + textwrap.dedent(
    """
    from ftaudit.eventlog import writer as writer_module

    def on_usr1(signum, frame):  # a user's handler (or a finalizer) that logs and flushes
        w.log(Metric(values={"i": 10.0}))
        w.flush()

    signal.signal(signal.SIGUSR1, on_usr1)
    convert = writer_module.build_table

    def usr1_then_convert(batch, **kwargs):
        # the handler runs on this (main) thread at its next instruction: inside the
        # flush's conversion, holding the buffer lock
        os.kill(os.getpid(), signal.SIGUSR1)
        return convert(batch, **kwargs)

    writer_module.build_table = usr1_then_convert
    w.flush()
    writer_module.build_table = convert
    w.close()
    print("closed", flush=True)
    """
)


def test_a_handler_that_logs_inside_its_threads_own_flush_does_not_wait_on_itself(
    tmp_path: Path,
):
    """A signal handler, finalizer or weakref callback run on the thread converting a flush
    under the buffer lock may log to the writer (and flush it): the event joins the next
    flush instead of waiting for a lock its own thread holds (that hung for good)."""
    with subprocess.Popen(
        [sys.executable, "-c", HANDLER_LOGS_CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.wait(timeout=120) == 0
        finally:
            proc.kill()
        assert proc.stdout is not None and proc.stdout.read().strip() == "closed"
    records = read_records(tmp_path)
    assert [(r.envelope.seq, r.event.values["i"]) for r in records] == [
        (i, float(i)) for i in range(11)
    ]


def test_an_interrupt_inside_the_conversion_loses_no_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A KeyboardInterrupt (Ctrl-C) that lands while a flush converts the buffer puts the
    buffer back: the next flush writes it and the writer reports nothing lost."""
    from ftaudit.eventlog import writer as writer_module

    convert = writer_module.build_table

    def interrupted(batch, **kwargs):
        monkeypatch.setattr(writer_module, "build_table", convert)
        raise KeyboardInterrupt

    monkeypatch.setattr(writer_module, "build_table", interrupted)
    writer = _writer(tmp_path, flush_rows=10**6, flush_interval_s=3600)
    for i in range(3):
        writer.log(Metric(values={"a": float(i)}))
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    writer.log(Metric(values={"a": 3.0}))
    writer.close()
    assert writer.report_losses() is None and writer.stats.write_errors == 0
    records = read_records(tmp_path)
    assert [(r.envelope.seq, r.event.values["a"]) for r in records] == [
        (i, float(i)) for i in range(4)
    ]


FORK_IN_FLUSH_CHILD = TEN_BUFFERED + textwrap.dedent(
    """
    import warnings
    from ftaudit.eventlog import writer as writer_module

    warnings.simplefilter("ignore", DeprecationWarning)  # fork() with the flusher running
    convert = writer_module.build_table
    forked = []

    def fork_then_convert(batch, **kwargs):
        # a fork while the flush holds both of the writer's locks (a worker started then)
        pid = os.fork()
        if pid == 0:  # the child leaves a `with EventWriter(...)` block: it closes its copy
            w.close()
            os._exit(0)
        forked.append(pid)
        return convert(batch, **kwargs)

    writer_module.build_table = fork_then_convert
    w.flush()
    writer_module.build_table = convert
    w.log(Metric(values={"i": 10.0}))
    w.close()
    for _ in range(1200):  # the child's close must return (at most 120 s)
        done, status = os.waitpid(forked[0], os.WNOHANG)
        if done:
            print("child", os.waitstatus_to_exitcode(status), flush=True)
            break
        time.sleep(0.1)
    else:
        os.kill(forked[0], signal.SIGKILL)
        print("child hung", flush=True)
    """
)


def test_a_forked_childs_close_neither_writes_nor_waits_on_the_parents_locks(tmp_path: Path):
    """A child forked while its parent flushes inherits the writer with both locks held:
    closing its copy (leaving a ``with`` block) returns at once and writes nothing, as its
    log calls do (its events are the parent's, to write and to report)."""
    proc = subprocess.run(
        [sys.executable, "-c", FORK_IN_FLUSH_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "child 0"
    records = read_records(tmp_path)
    assert [(r.envelope.seq, r.event.values["i"]) for r in records] == [
        (i, float(i)) for i in range(11)
    ]
    assert len(scan_run(tmp_path).segments) == 2


def test_a_flush_converts_holding_the_buffer_lock_and_events_logged_meanwhile_follow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The flush converts the buffer holding the buffer lock, so a thread that logs
    meanwhile waits instead of taking the GIL from the conversion slice by slice
    (``EventWriter._freeze``); what it logs lands after the flushed events, in sequence."""
    from ftaudit.eventlog import writer as writer_module

    converting, release, held = threading.Event(), threading.Event(), []
    convert = writer_module.build_table

    def blocked(batch, **kwargs):
        held.append(writer._lock.locked())
        converting.set()
        release.wait(120)
        return convert(batch, **kwargs)

    monkeypatch.setattr(writer_module, "build_table", blocked)
    writer = _writer(tmp_path, flush_rows=10**6, flush_interval_s=3600)
    writer.log(Metric(values={"a": 0.0}))
    flusher = threading.Thread(target=writer.flush)
    flusher.start()
    assert converting.wait(120)
    logger = threading.Thread(target=writer.log_fields, args=(Metric, {"a": 1.0}))
    logger.start()
    release.set()
    flusher.join(120)
    logger.join(120)
    writer.close()
    assert held == [True, True]  # the flush's conversion and the close's
    records = read_records(tmp_path)
    assert [(r.envelope.seq, r.event.values["a"]) for r in records] == [(0, 0.0), (1, 1.0)]
    assert len(scan_run(tmp_path).segments) == 2


def test_a_full_buffer_wakes_the_flusher_once_until_a_flush_takes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """While the flusher is busy (here: sealing the last segment), the events that keep
    the buffer full do not wake it again: a wake-up costs the logging thread a lock, and
    before the flusher got the GIL back nearly every event of the benchmark's durable
    round paid it. The next flush sets the next threshold; nothing is lost or reordered."""
    from ftaudit.eventlog import writer as writer_module

    class CountingEvent(threading.Event):
        sets = 0

        def set(self) -> None:
            self.sets += 1
            super().set()

    sealing, release = threading.Event(), threading.Event()
    write = writer_module.write_atomically

    def blocked(*args, **kwargs):
        sealing.set()
        release.wait(120)
        return write(*args, **kwargs)

    monkeypatch.setattr(writer_module, "write_atomically", blocked)
    with monkeypatch.context() as m:
        m.setattr(threading, "Event", CountingEvent)
        writer = _writer(tmp_path, flush_rows=10, flush_interval_s=3600)
    for i in range(10):  # the tenth fills the buffer: one wake-up, the flush starts
        writer.log_fields(Metric, {"i": float(i)})
    assert sealing.wait(120)
    for i in range(10, 110):  # the buffer fills again at the 20th; the flusher is busy
        if i % 2:
            writer.log_fields(Metric, {"i": float(i)})
        else:
            writer.log(Metric(values={"i": float(i)}))
    assert writer._wake.sets == 2  # type: ignore[attr-defined]
    release.set()
    writer.close()
    records = read_records(tmp_path)
    assert [r.event.values["i"] for r in records] == [float(i) for i in range(110)]


def test_write_failure_is_counted_and_retried(tmp_path: Path):
    blocker = tmp_path / "events"
    blocker.write_text("not a directory")  # the writer cannot create events/<writer>/
    writer = _writer(tmp_path, flush_rows=10**6, flush_interval_s=3600)
    writer.log(Metric(values={"a": 1.0}))
    assert writer.flush() == -1
    assert writer.stats.write_errors == 1
    blocker.unlink()
    assert writer.flush() == 0  # the failed batch was kept and now lands
    writer.close()
    assert _count(tmp_path) == 1


def test_fail_closed_raises(tmp_path: Path):
    from ftaudit.errors import WriterError

    (tmp_path / "events").write_text("x")
    writer = _writer(tmp_path, fail_closed=True)
    writer.log(Metric(values={"a": 1.0}))
    with pytest.raises(WriterError, match="cannot write events"):
        writer.flush()
    (tmp_path / "events").unlink()
    writer.close()
    assert scan_run(tmp_path).segments
