"""Progress lines for the person watching: stderr, because stdout carries the report."""

from __future__ import annotations

import sys


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
