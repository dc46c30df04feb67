"""Every writer head the log recorded: what checkpoints and ``run_finished`` vouch for.

A head is a writer's last sealed sequence number, with the digest of the segment ending
there when known. Three records hold them: each checkpoint's snapshot of its own
process's writers (``writers`` and ``chain_heads``), the driver's checkpoint's
``job_heads`` (every writer of the run), and ``run_finished``'s ``final_heads``. FT001
checks that the log still reaches each head with the same digest: a truncated tail, a
deleted writer or a rewritten history contradicts one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ftaudit.verifier.segment_state import SegmentFed

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext

SNAPSHOT_COLUMNS = (
    "iteration",
    "incarnation",
    "writer",
    "seq",
    "writers",
    "chain_heads",
    "job_heads",
)

FINISHES = """
    SELECT incarnation, final_heads, writer, seq FROM run_finished ORDER BY incarnation, seq"""


@dataclass(frozen=True)
class RecordedHead:
    """One head one record vouches for."""

    record: str
    """What recorded it, in words: ``checkpoint 5``, ``run_finished of incarnation 2``,
    ``the seal``."""
    incarnation: int
    """The incarnation that recorded it (-1 for a seal kept outside the run)."""
    writer: str
    last_seq: int
    digest: str
    """"" when the record holds only the sequence number."""


def as_dict(value: Any) -> dict:
    """A map column from Arrow (a list of pairs, or a dict) as a dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    return dict(value)


class CheckpointHeads(SegmentFed):
    """The heads the loaded checkpoint records vouch for, kept by segment (see
    :class:`SegmentFed`): a follower's poll asks DuckDB only about new checkpoint records
    (the query over every one cost each poll about 10 ms), in the order a full
    verification gives (incarnation, iteration, then the record's writer and seq)."""

    event_type = "checkpoint_saved"

    def __init__(self) -> None:
        super().__init__()
        self._by_segment: dict[str, list[tuple[tuple[int, int, str, int], RecordedHead]]] = {}
        self._ordered: list[RecordedHead] | None = None

    def add(self, ctx: RunContext, segments: Collection[str] | None) -> None:
        rows = self.fed_rows(ctx, SNAPSHOT_COLUMNS, segments, label="recorded heads: checkpoints")
        for r in rows:
            order = (r["incarnation"], r["iteration"], r["writer"], r["seq"])
            held = self._by_segment.setdefault(r["segment"], [])
            held += ((order, h) for h in _checkpoint_heads(r))
        self._ordered = None

    def drop(self, segment: str) -> None:
        if self._by_segment.pop(segment, None) is not None:
            self._ordered = None

    @property
    def heads(self) -> list[RecordedHead]:
        """Every head the loaded checkpoint records vouch for, in record order."""
        if self._ordered is None:
            held = (pair for pairs in self._by_segment.values() for pair in pairs)
            self._ordered = [h for _, h in sorted(held, key=lambda pair: pair[0])]
        return self._ordered


def _checkpoint_heads(r: dict[str, Any]) -> list[RecordedHead]:
    """The heads one checkpoint record vouches for: its process's writers, then the job's."""
    record, inc = f"checkpoint {r['iteration']}", r["incarnation"]
    digests = as_dict(r["chain_heads"])
    out = [
        RecordedHead(record, inc, writer, seq, digests.get(writer) or "")
        for writer, seq in as_dict(r["writers"]).items()
        if seq is not None and seq >= 0
    ]
    out += (
        RecordedHead(record, inc, writer, head["last_seq"], head["digest"] or "")
        for writer, head in as_dict(r["job_heads"]).items()
        if head is not None and head["last_seq"] >= 0
    )
    return out


def recorded_heads(ctx: RunContext) -> list[RecordedHead]:
    """Every head any checkpoint or ``run_finished`` of the run recorded, and the seal's."""
    out: list[RecordedHead] = list(ctx.kept(CheckpointHeads).heads)
    seal = ctx.anchors.seal
    if seal is not None:
        for writer, head in seal.heads.items():
            if head.last_seq >= 0:
                out.append(RecordedHead("the seal", -1, writer, head.last_seq, head.digest))
    for r in ctx.rows(FINISHES, label="recorded heads: run_finished", needs=("run_finished",)):
        record, inc = f"run_finished of incarnation {r['incarnation']}", r["incarnation"]
        for writer, head in as_dict(r["final_heads"]).items():
            if head is not None and head["last_seq"] >= 0:
                out.append(
                    RecordedHead(record, inc, writer, head["last_seq"], head["digest"] or "")
                )
    return out


__all__ = ["CheckpointHeads", "RecordedHead", "as_dict", "recorded_heads"]
