"""What a verification holds the run to beyond its own log (``ft-verify`` options).

A run's log vouches for itself only up to its last record: a log cut after it, or cut
together with it, looks like a run that stopped there. These options say what else the
verifier expects: that the run finished, and the evidence kept outside the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ftaudit.verifier.seal import Seal


@dataclass(frozen=True)
class Anchors:
    """Expectations and outside evidence of one verification (all off by default)."""

    require_finished: bool = False
    """The last incarnation must have logged ``run_finished`` (``--require-finished``):
    a run cut short (a crash, or its end deleted) fails instead of verifying what is left."""
    fallback_dirs: tuple[str, ...] = ()
    """Folders of writers' last-chance records (``--fallback-dir``), searched besides the
    default one (:func:`ftaudit.eventlog.fallback.fallback_dir`)."""
    seal: Seal | None = None
    """A seal kept outside the run (``--manifest``), its signature already checked: the
    run must still reach every head it names, and have no writer it does not name."""
    mac_key: bytes | None = field(default=None, repr=False)
    """The run's HMAC key (``$FTAUDIT_HMAC_KEY_FILE``, ``$FTAUDIT_HMAC_KEY`` or
    ``--key-file``): every segment and checkpoint record must then carry a MAC made with it.
    Without it, MACs are not checked (a run whose segments carry some gets a warning)."""


NO_ANCHORS = Anchors()
"""The default: the run is judged by its own log alone."""

__all__ = ["NO_ANCHORS", "Anchors"]
