"""The one error tree of ftaudit.

Every error a user can meet derives from :class:`FtauditError`; the CLI maps the
classes to exit codes (see ``ftaudit.cli.exit_codes``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

_T = TypeVar("_T")


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


class SegmentVanishedError(CorruptSegmentError):
    """A listed segment was gone when it was read: a writer's roll or ``ftaudit compact``
    removed an original that a merged segment now holds (or someone deleted it). Readers
    that listed the run themselves list it again; what vanished with no merged segment
    holding it is then a sequence gap that FT001 reports, not an unreadable run."""


class RunFileError(UnusableInputError, ValueError):
    """A run directory's ``run.json`` is missing or does not hold a valid run id."""


class UnknownEventTypeError(UnusableInputError):
    """A segment holds an event type that no registered model describes."""


class QueryError(FtauditError):
    """A SQL query over the log failed."""


class WriterError(FtauditError):
    """The event writer could not make events durable."""


class UsageError(FtauditError, ValueError):
    """A caller gave ftaudit something it cannot use: a bad argument, a buffer or a run that
    does not match. A ``ValueError`` too, so code written against the plain builtin still
    catches it."""


def by_name(known: Mapping[str, _T], name: str, what: str) -> _T:
    """The entry of ``known`` a user named (snake_case; dashes are accepted too); an unknown
    name is a :class:`UsageError` listing the known ones (``what``: ``bug``, ...)."""
    found = known.get(name.replace("-", "_"))
    if found is None:
        raise UsageError(f"unknown {what} {name!r}; known {what}s: {', '.join(known)}")
    return found


class EngineChecksumError(FtauditError):
    """An engine's weight checksums could not be read: unreachable, refused, or malformed."""

    def __init__(self, engine: str, reason: str) -> None:
        super().__init__(f"{engine}: {reason}")
        self.engine = engine
        self.reason = reason


class ChecksumUnsupportedError(EngineChecksumError):
    """The engine answers, but its build has no weight-checksum action (too old, or not enabled)."""


class UnsupportedMegatronSetupError(FtauditError, ValueError):
    """A Megatron-core setup in which witnesses cannot work (``megatron/support.py``)."""


class UnsupportedOptimizerError(FtauditError, TypeError):
    """The optimizer's per-row state is unknown, so stale witness rows cannot be cleared."""


class DemoError(FtauditError):
    """The demo's training job failed in a way no fault of the schedule explains."""


class EveryCellLost(DemoError):
    """A demo job has no cell left: it exits, and ``ftaudit demo`` starts the next
    incarnation from the newest checkpoint, as after the job's own death."""


class DiscardVote(FtauditError):
    """A demo cell did not see every cell of its quorum vote to commit. Never raised: it is
    reported to torchft's ``Manager.report_error`` so that ``should_commit()`` refuses."""


class ManifestError(UnusableInputError):
    """A manifest file is missing, foreign, damaged, or does not match its digest."""


class UnknownRuleError(FtauditError, ValueError):
    """``select`` or ``skip`` named a rule that does not exist."""


class KeyFileError(UnusableInputError):
    """The HMAC key file cannot be read, or is empty (the message names the file, never the key)."""


class CompactError(UnusableInputError):
    """A run cannot be compacted (a damaged segment, a broken chain, a keyed run without its
    key); nothing was changed for the writer named."""


class SealError(UnusableInputError):
    """A seal cannot be read, or its signature cannot be checked or does not match."""


class UnsupportedAnnotation(UsageError, TypeError):
    """A model field whose type has no Arrow mapping."""


class UnsupportedShardingError(UsageError):
    """A DTensor placement whose local shard is not a block of whole rows."""
