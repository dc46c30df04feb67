"""The one error tree of ftaudit.

Every error a user can meet derives from :class:`FtauditError`; the CLI maps the
classes to exit codes (see ``ftaudit.cli.exit_codes``).
"""

from __future__ import annotations


class FtauditError(Exception):
    """Base class of every ftaudit error."""


class UnusableInputError(FtauditError):
    """The run directory cannot be verified: missing, empty, unreadable or corrupt."""


class CorruptSegmentError(UnusableInputError):
    """A segment file exists but is not a readable ftaudit segment."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class RunFileError(UnusableInputError, ValueError):
    """A run directory's ``run.json`` is missing or does not hold a valid run id."""


class UnknownEventTypeError(UnusableInputError):
    """A segment holds an event type that no registered model describes."""


class QueryError(FtauditError):
    """A SQL query over the log failed."""


class WriterError(FtauditError):
    """The event writer could not make events durable."""
