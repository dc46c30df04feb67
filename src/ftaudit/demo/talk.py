"""Progress lines for the person watching: stderr, because stdout carries the report.

The training job is a subprocess whose stdout and stderr also carry Ray's and torchft's
notices, printed by their own threads; a progress line sharing them can be split by one
and then dropped with the notice. So the job speaks on a pipe of its own, which
``ftaudit demo`` forwards to its stderr.
"""

from __future__ import annotations

import sys
from typing import TextIO

_stream: TextIO | None = None
"""Where progress goes; None is the current ``sys.stderr``."""


def speak_on(stream: TextIO) -> None:
    """Send this process's progress lines to ``stream`` (the job: its progress pipe)."""
    global _stream
    _stream = stream


def say(message: str) -> None:
    stream = sys.stderr if _stream is None else _stream
    stream.write(message + "\n")  # one write: no other thread's output lands inside the line
    stream.flush()
