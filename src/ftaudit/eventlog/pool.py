"""Per-file work on a few threads, a bounded number of files ahead, results in order.

Reading a run of many small segments is per-file work whose heavy part (reading the
bytes, hashing them, Arrow's footer parse and decode) releases the GIL: on threads it
runs beside the Python that checks and gathers the results, on a second core.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

THREADS = min(4, os.cpu_count() or 1)
"""Threads doing per-file work while the caller handles earlier results."""

_T = TypeVar("_T")
_R = TypeVar("_R")


def in_order(
    work: Callable[[_T], _R],
    items: Iterable[_T],
    *,
    ahead: int,
    weight: Callable[[_T], int] | None = None,
    max_weight: int = 0,
    threads: int = THREADS,
) -> Iterator[tuple[_T, _R]]:
    """Each item with ``work(item)``, in the order given, computed on ``threads`` threads
    at most ``ahead`` items ahead (and, with ``weight``, about ``max_weight`` of it once
    each thread has an item: what is held stays bounded when items are large); with no
    thread (``threads`` 0), one by one in the caller's thread as it asks.

    Results and errors come back in order: the first item in that order whose work
    raised is the one whose error is raised, as when they were done one by one (a later
    one may fail first on its thread; its error is never seen). Stopping early cancels
    what was not started.
    """
    if threads < 1:
        yield from ((item, work(item)) for item in items)
        return
    queued = iter(items)
    pending: deque[tuple[_T, Future[_R], int]] = deque()
    held = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="ftaudit-read") as pool:
        try:
            while True:
                while len(pending) < ahead and (
                    weight is None or held < max_weight or len(pending) < threads
                ):
                    item = next(queued, None)
                    if item is None:
                        break
                    size = weight(item) if weight is not None else 0
                    pending.append((item, pool.submit(work, item), size))
                    held += size
                if not pending:
                    return
                item, future, size = pending.popleft()
                held -= size
                yield item, future.result()
        finally:
            for _, waiting, _ in pending:
                waiting.cancel()


__all__ = ["THREADS", "in_order"]
