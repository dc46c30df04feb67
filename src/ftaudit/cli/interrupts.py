"""Ctrl-C in any command: DuckDB stops at once and the command exits 130 with one line.

Python runs a signal handler only between bytecodes of the main thread, and a DuckDB
query runs in C++ without looking at Python's signal flags: Ctrl-C used to wait for the
query to end (some never did), then surfaced as "internal error: Query interrupted",
exit 2. Here the C-level handler's wakeup byte (``signal.set_wakeup_fd``) wakes a watcher
thread at once, which interrupts every DuckDB connection ftaudit holds; whatever error
the interrupted work raises afterwards is reported as the interruption it is.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ftaudit.cli import exit_codes


@dataclass
class InterruptState:
    """Whether Ctrl-C was pressed during this command, and whether that was told."""

    fired: threading.Event = field(default_factory=threading.Event)
    presses: int = 0
    reported: bool = False


STATE = InterruptState()


def interrupted() -> bool:
    """Whether Ctrl-C was pressed while the current command ran."""
    return STATE.fired.is_set()


def _watch(wake: socket.socket) -> None:
    while True:
        try:
            data = wake.recv(64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            STATE.fired.set()
            from ftaudit.eventlog.connections import interrupt_all

            interrupt_all()


MESSAGE = "error: interrupted"
"""The one line a command says when Ctrl-C stopped it."""


def first_report() -> bool:
    """True the first time a command tells of the interruption, False ever after: the
    line is said once, whichever of the handler, ``abort`` or the entry point gets there."""
    if STATE.reported:
        return False
    STATE.reported = True
    return True


def _on_sigint(signum: int, frame: object) -> None:
    STATE.fired.set()
    STATE.presses += 1
    if STATE.presses > 1:  # a second Ctrl-C: stop now, whatever still hangs
        if not STATE.reported:
            os.write(2, f"{MESSAGE}\n".encode())
        os._exit(exit_codes.INTERRUPTED)
    raise KeyboardInterrupt


@contextmanager
def ctrl_c_stops_duckdb() -> Iterator[None]:
    """Within this block, Ctrl-C interrupts DuckDB at once (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield  # a background job of a shell: Ctrl-C is not ours to handle
        return
    wake, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    previous_fd = signal.set_wakeup_fd(wake_write.fileno(), warn_on_full_buffer=False)
    previous_handler = signal.signal(signal.SIGINT, _on_sigint)
    watcher = threading.Thread(target=_watch, args=(wake,), name="ftaudit-ctrl-c", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous_handler)
        signal.set_wakeup_fd(previous_fd)
        wake_write.close()  # the watcher reads end-of-file and stops
        watcher.join(timeout=5)
        wake.close()


__all__ = ["MESSAGE", "STATE", "ctrl_c_stops_duckdb", "first_report", "interrupted"]
