"""Every writer's head as the run directory shows it: what a driver's records vouch for.

A driver's checkpoint and its ``run_finished`` record the head (last sealed sequence
number and digest) of every writer of the run, not only of its own process: each
worker seals its own segments, so the run directory is where their heads are. Reading
them costs one folder listing and one Parquet footer per writer; a writer whose last
file cannot be read is left out (recording evidence never stops training). A last file
that a writer's roll or close removed after the listing makes the run be listed again.
"""

from __future__ import annotations

import logging
import os

import pyarrow.parquet as pq

from ftaudit.errors import SegmentVanishedError, UnusableInputError
from ftaudit.eventlog.events import WriterHead
from ftaudit.eventlog.rundir import list_segments, relisting
from ftaudit.eventlog.segment import SegmentMeta

log = logging.getLogger("ftaudit.eventlog")


def disk_heads(run_dir: str | os.PathLike[str]) -> dict[str, WriterHead]:
    """``{writer id: its head}`` for every writer of the run, from its last segment's footer."""
    try:
        return relisting(lambda: _heads(run_dir))
    except UnusableInputError as exc:  # a vanished last file too, listed again 8 times
        log.warning("ftaudit: cannot list the run for the writers' heads: %s", exc)
        return {}


def _heads(run_dir: str | os.PathLike[str]) -> dict[str, WriterHead]:
    listing = list_segments(run_dir, allow_empty=True)
    heads: dict[str, WriterHead] = {}
    for writer, files in listing.writers.items():
        last = files[-1]
        try:
            meta = SegmentMeta.from_metadata(pq.read_metadata(last.path).metadata)
        except FileNotFoundError:
            raise SegmentVanishedError(last.path, "removed after the run was listed") from None
        except (OSError, ValueError, KeyError) as exc:
            log.warning("ftaudit: cannot read the head of writer %s: %s", writer, exc)
            continue
        if meta.writer == writer and meta.first_seq == last.first_seq:
            heads[writer] = WriterHead(last_seq=meta.last_seq, digest=meta.head_digest)
    return heads


__all__ = ["disk_heads"]
