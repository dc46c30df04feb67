"""Every writer head the log recorded: what checkpoints and ``run_finished`` vouch for.

A head is a writer's last sealed sequence number, with the digest of the segment ending
there when known. Three records hold them: each checkpoint's snapshot of its own
process's writers (``writers`` and ``chain_heads``), the driver's checkpoint's
``job_heads`` (every writer of the run), and ``run_finished``'s ``final_heads``. FT001
checks that the log still reaches each head with the same digest: a truncated tail, a
deleted writer or a rewritten history contradicts one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ftaudit.verifier.context import RunContext

SNAPSHOTS = """
    SELECT iteration, incarnation, writers, chain_heads, job_heads FROM checkpoint_saved
    ORDER BY incarnation, iteration"""

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


def recorded_heads(ctx: RunContext) -> list[RecordedHead]:
    """Every head any checkpoint or ``run_finished`` of the run recorded, and the seal's."""
    out: list[RecordedHead] = []
    for r in ctx.rows(SNAPSHOTS, label="recorded heads: checkpoints"):
        record, inc = f"checkpoint {r['iteration']}", r["incarnation"]
        digests = as_dict(r["chain_heads"])
        for writer, seq in as_dict(r["writers"]).items():
            if seq is not None and seq >= 0:
                out.append(RecordedHead(record, inc, writer, seq, digests.get(writer) or ""))
        for writer, head in as_dict(r["job_heads"]).items():
            if head is not None and head["last_seq"] >= 0:
                out.append(
                    RecordedHead(record, inc, writer, head["last_seq"], head["digest"] or "")
                )
    seal = ctx.anchors.seal
    if seal is not None:
        for writer, head in seal.heads.items():
            if head.last_seq >= 0:
                out.append(RecordedHead("the seal", -1, writer, head.last_seq, head.digest))
    for r in ctx.rows(FINISHES, label="recorded heads: run_finished"):
        record, inc = f"run_finished of incarnation {r['incarnation']}", r["incarnation"]
        for writer, head in as_dict(r["final_heads"]).items():
            if head is not None and head["last_seq"] >= 0:
                out.append(
                    RecordedHead(record, inc, writer, head["last_seq"], head["digest"] or "")
                )
    return out


__all__ = ["RecordedHead", "as_dict", "recorded_heads"]
