"""Pacing a follower's polls so that they take at most a share of one core.

A poll's cost is mostly fixed (listing the run, moving the loaded window, about forty
DuckDB statements for the rules), so its cost per judged step falls the fewer polls
there are (``docs/scale.md``). :class:`CpuShare` lets the user set the overhead instead:
a poll that began at ``t`` and took ``c`` seconds of CPU makes the next one due at
``t + c / share``, so over every poll and the wait after it the follower's CPU is at
most ``share`` of the wall time. A slower poll (more settled since the last one) waits
longer; every step is still judged, only later, and a poll judges everything that
settled meanwhile.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class CpuShare:
    """When the next poll is due, for polls to use at most ``share`` of one core.

    ``cpu`` is the CPU clock a poll is measured by: the process's by default (a follower
    of its own, ``ft-verify --follow``). In a process where other threads work meanwhile
    (a driver), the process clock counts their CPU too, so polls come less often than
    the share allows, never more often.
    """

    share: float
    """The fraction of one core, in ``(0, 1]``."""
    clock: Callable[[], float] = time.monotonic
    cpu: Callable[[], float] = time.process_time
    _due: float = field(default=-math.inf, init=False)
    last_cpu: float = field(default=0.0, init=False)
    """The CPU seconds of the last poll run through :meth:`run`."""

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"a CPU share is a fraction in (0, 1], not {self.share!r}")

    def wait(self) -> float:
        """Seconds until the next poll is due (0.0: it is due now)."""
        return max(0.0, self._due - self.clock())

    def run(self, poll: Callable[[], T]) -> T:
        """Run ``poll`` now and set when the next one is due (also when it raises)."""
        began, spent = self.clock(), self.cpu()
        try:
            return poll()
        finally:
            self.last_cpu = self.cpu() - spent
            self._due = began + self.last_cpu / self.share
