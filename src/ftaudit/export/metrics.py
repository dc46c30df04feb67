"""The metrics of a run's committed history, and their CSV form.

A metric belongs to the committed history when its (incarnation, step, attempt) is a
committed step attempt (the ``committed_metrics`` view): values logged by a retried attempt,
by steps a crashed incarnation ran after the checkpoint the next one resumed from, or
outside any step are left out.
"""

from __future__ import annotations

import csv
import io
import os
from collections import defaultdict
from dataclasses import dataclass, replace

COMMITTED_METRICS = """
    SELECT incarnation, step, attempt, name, value, source_kind, cell, rank,
           epoch_us(ts) / 1e6 AS wall_time
    FROM committed_metrics
    ORDER BY step, name, source_kind, cell NULLS FIRST, rank NULLS FIRST, seq"""
"""Every metric value of a committed step attempt, in step order."""


@dataclass(frozen=True)
class CommittedMetric:
    """One metric value of the committed history."""

    step: int
    name: str
    value: float
    source: str
    """Who logged it: ``driver``, or ``trainer.c<cell>.r<rank>`` (``actor``/``critic``)."""
    incarnation: int
    attempt: int
    wall_time: float
    tag: str = ""
    """``name``, or ``name/source`` when several processes logged metrics of that name."""


def _source(kind: str, cell: int | None, rank: int | None) -> str:
    if cell is None:
        return kind
    return f"{kind}.c{cell}.r{rank}" if rank is not None else f"{kind}.c{cell}"


def committed_metrics(run_dir: str | os.PathLike[str]) -> list[CommittedMetric]:
    """The committed metrics of the run at ``run_dir`` (raises ``UnusableInputError``)."""
    import duckdb

    import ftaudit
    from ftaudit.errors import UnusableInputError

    with ftaudit.connect(run_dir, sandbox=True) as con:
        try:
            rows = con.execute(COMMITTED_METRICS).fetchall()
        except duckdb.Error as exc:  # a segment that loads but cannot be queried
            raise UnusableInputError(
                f"{os.fspath(run_dir)}: cannot read the committed metrics: {exc}"
            ) from None
    metrics = [
        CommittedMetric(
            step=int(step),
            name=str(name),
            value=float(value),
            source=_source(kind, cell, rank),
            incarnation=int(inc),
            attempt=int(attempt),
            wall_time=float(wall),
        )
        for inc, step, attempt, name, value, kind, cell, rank, wall in rows
    ]
    sources: dict[str, set[str]] = defaultdict(set)
    for m in metrics:
        sources[m.name].add(m.source)
    return [
        replace(m, tag=m.name if len(sources[m.name]) == 1 else f"{m.name}/{m.source}")
        for m in metrics
    ]


CSV_COLUMNS = ("step", "tag", "value", "name", "source", "incarnation", "attempt", "wall_time")


def write_csv(metrics: list[CommittedMetric], out: io.TextIOBase | None = None) -> str:
    """The metrics as CSV (``repr`` of floats, so NaN, inf and every digit survive)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for m in metrics:
        writer.writerow(
            (
                m.step,
                m.tag,
                repr(m.value),
                m.name,
                m.source,
                m.incarnation,
                m.attempt,
                repr(m.wall_time),
            )
        )
    text = buffer.getvalue()
    if out is not None:
        out.write(text)
    return text
