"""A training-like process that logs events until it dies (imported by the forkserver).

It writes, in the run directory shared by every trial, one incarnation with three writers:

- the driver: ``run_started`` (inside ``RunLog.start``), then a ``checkpoint_saved`` now and
  then (``RunLog.record_checkpoint``, which flushes every writer of the process first);
- ``trainer-c0``: metrics ``{"i": seq}`` in random bursts, each followed by an explicit
  ``flush`` (the durability point the torture checks exactly);
- ``trainer-c1``: the same metrics, flushed only by the background flusher (small
  ``flush_rows``, short interval), racing the main thread.

Before each flush it appends ``B <writer> <last seq that flush may seal>`` to a progress file,
and after it ``D <writer> <last durable seq>``; ``os.write`` to an ``O_APPEND`` descriptor is
in the kernel as soon as it returns, so the lines survive any death of the process.

The process dies by one of three means, at a random point:

- ``sigkill``: the parent sends SIGKILL after a random delay;
- ``exit``: a profile hook (every thread) calls ``os._exit`` at the N-th function call or
  return, so the death lands between two arbitrary calls, e.g. between ``fsync`` and ``rename``;
- ``segv``: a thread sleeps a random while, then reads address 0 (a real segmentation fault).
"""

from __future__ import annotations

import ctypes
import os
import random
import sys
import threading
import time

from ftaudit.eventlog import Driver, EventWriter, Metric, RunLog, Trainer, WriterOptions

EXIT_CODE = 77
"""The exit status of an ``exit``-mode death (any other status is a failure)."""

DRIVER = "driver"
EXPLICIT = "trainer-c0"
BACKGROUND = "trainer-c1"


class Progress:
    """Append-only lines in a file, one ``os.write`` each (atomic for short lines)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, *parts: object) -> None:
        os.write(self.fd, (" ".join(map(str, parts)) + "\n").encode())


def _die_at_call(count: int) -> None:
    """Install a profile hook on every thread that exits the process at call ``count``."""
    remaining = [count]
    lock = threading.Lock()

    def hook(frame: object, event: str, arg: object) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0] <= 0:
                os._exit(EXIT_CODE)

    threading.setprofile(hook)
    sys.setprofile(hook)


def _segfault_after(delay_s: float) -> None:
    def crash() -> None:
        time.sleep(delay_s)
        ctypes.string_at(0)  # a real SIGSEGV: reads the NULL page

    threading.Thread(target=crash, daemon=True).start()


def _arm(mode: str, param: float) -> None:
    if mode == "exit":
        _die_at_call(int(param))
    elif mode == "segv":
        _segfault_after(param)


def train_until_killed(
    run_dir: str, progress_path: str, seed: int, mode: str, param: float, anchor: str
) -> None:
    """Log, flush and checkpoint forever; ``mode``/``param`` arm the death (see module doc),
    counted from the process start (``anchor="start"``) or from the training loop (``"loop"``).
    """
    rng = random.Random(seed)
    progress = Progress(progress_path)
    progress.line("S", os.getpid())
    if anchor == "start":
        _arm(mode, param)
    options = WriterOptions(fsync=True, flush_rows=1 << 30, flush_interval_s=3600)
    run = RunLog.start(run_dir, buffer_size=64, options=options)
    driver = run.writer(Driver())
    progress.line("D", DRIVER, driver.last_durable_seq)
    explicit = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    background = EventWriter(  # flushed by its background thread only, not in snapshots
        run_dir,
        Trainer(cell_index=1, rank_within_cell=0),
        run_id=run.run_id,
        incarnation=run.incarnation,
        options=WriterOptions(fsync=True, flush_rows=rng.randint(50, 2000), flush_interval_s=0.005),
    )
    progress.line("W", EXPLICIT, explicit.writer_id)
    progress.line("W", BACKGROUND, background.writer_id)
    if anchor == "loop":
        _arm(mode, param)
    last = {DRIVER: 0, EXPLICIT: -1}
    bg_seq = 0
    iteration = 0
    while True:
        for _ in range(rng.randint(1, 400)):
            nxt = last[EXPLICIT] + 1
            if nxt % 2:  # both ways of logging share one sequence: kills hit either
                last[EXPLICIT] = explicit.log_fields(Metric, {"i": float(nxt)}, step=nxt, attempt=0)
            else:
                last[EXPLICIT] = explicit.log(Metric(step=nxt, attempt=0, values={"i": float(nxt)}))
            background.log_fields(Metric, {"i": float(bg_seq)}, step=bg_seq, attempt=0)
            bg_seq += 1
        if rng.random() < 0.2:
            # record_checkpoint flushes every writer, then logs and flushes the snapshot
            progress.line("B", EXPLICIT, last[EXPLICIT])
            progress.line("B", DRIVER, last[DRIVER] + 1)
            event = run.record_checkpoint(iteration)
            last[DRIVER] += 1
            progress.line("D", EXPLICIT, explicit.last_durable_seq)
            progress.line("D", DRIVER, driver.last_durable_seq)
            progress.line("C", iteration, *sorted(f"{w}={s}" for w, s in event.writers.items()))
            iteration += 1
        else:
            progress.line("B", EXPLICIT, last[EXPLICIT])
            durable = explicit.flush()
            progress.line("D", EXPLICIT, durable)
        progress.line("D", BACKGROUND, background.last_durable_seq)
