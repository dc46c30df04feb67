"""What a forger without the run's key can do: rewrite segments and recompute every digest.

Used by the security tests to show what keyless evidence misses and what a seal or the
writers' MACs catch.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.segment import DIGEST_KEY, DIGEST_PLACEHOLDER, MAC_KEY, write_atomically

HEAD_COLUMNS = (
    "checkpoint_saved.chain_heads",
    "checkpoint_saved.job_heads",
    "run_finished.final_heads",
)
"""The record columns that name writers' heads (digests a forger must patch)."""

Edit = Callable[[int, pa.Table], pa.Table]


def rechain(folder: Path, edit: Edit, renamed: dict[str, str], *, strip_mac: bool = False) -> None:
    """Rewrite every segment of a writer through ``edit``, recomputing each digest and
    chain link as a keyless forger can; adds ``{old digest: new digest}`` to ``renamed``
    as it goes (a segment's records may name the heads of the segments before it). The
    MAC a footer holds is copied as it was (it cannot be recomputed), or removed with
    ``strip_mac``."""
    prev = ""
    for i, seg in enumerate(sorted(folder.glob("*.parquet"))):
        meta = dict(pq.read_metadata(seg).metadata or {})
        old = meta[DIGEST_KEY.encode()].decode()
        meta[b"ftaudit.prev_digest"] = prev.encode()
        meta[DIGEST_KEY.encode()] = DIGEST_PLACEHOLDER.encode()
        if strip_mac:
            meta.pop(MAC_KEY.encode(), None)
        tmp = seg.with_name("forged.parquet")
        table = edit(i, pq.read_table(seg)).replace_schema_metadata(meta)
        prev = renamed[old] = write_atomically(table, tmp, fsync=False)
        tmp.replace(seg)


def substitute(value: object, renamed: dict[str, str]) -> object:
    """``value`` with every string that is an old digest replaced by its new one."""
    if isinstance(value, str):
        return renamed.get(value, value)
    if isinstance(value, list):
        return [substitute(v, renamed) for v in value]
    if isinstance(value, tuple):
        return tuple(substitute(v, renamed) for v in value)
    if isinstance(value, dict):
        return {k: substitute(v, renamed) for k, v in value.items()}
    return value


def patch_heads(renamed: dict[str, str]) -> Edit:
    """An edit that makes every record naming a rewritten head name its new digest."""

    def patch(_: int, table: pa.Table) -> pa.Table:
        for col in HEAD_COLUMNS:
            if col in table.column_names:
                j = table.schema.get_field_index(col)
                values = substitute(table[col].to_pylist(), renamed)
                field = table.schema.field(j)
                table = table.set_column(j, field, pa.array(values, field.type))
        return table

    return patch
