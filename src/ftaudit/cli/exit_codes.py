"""The exit codes of ``ft-verify`` and ``ftaudit``: a contract with CI, kept in one place.

``0`` verified, ``1`` violations, ``2`` could not verify: a CI job can tell a run that
broke its invariants from a run (or an invocation) that could not be checked at all.
"""

from __future__ import annotations

from typing import Final

OK: Final = 0
"""All selected rules hold (warnings allowed unless ``--strict``); a query was answered."""

VIOLATIONS: Final = 1
"""At least one rule failed: an error, or a warning under ``--strict``."""

UNUSABLE: Final = 2
"""Could not verify: missing or unreadable run directory, corrupt or foreign segment,
unknown event type, bad command-line usage, unwritable output file, or an internal error."""

QUERY_FAILED: Final = 3
"""``ftaudit sql`` only: the query was rejected (syntax, unknown view, or an attempt to
touch files outside the run, which the sandbox forbids)."""

MISSING_EXTRA: Final = 4
"""The command needs an optional dependency that is not installed (``ftaudit demo`` without
the ``ray`` extra); the message names the ``pip install`` that provides it."""

INTERRUPTED: Final = 130
"""Stopped by Ctrl-C (128 + SIGINT, as shells report it)."""
