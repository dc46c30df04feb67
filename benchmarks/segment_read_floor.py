"""What reading a run's segment files costs outside ftaudit: the floor for ``ft-verify``.

Times one way of reading every segment of ``RUN_DIR`` in this process (wall, CPU, peak RSS):

- ``hash``: read each file's bytes and SHA-256 them (what the digest check needs);
- ``footers``: DuckDB's ``parquet_kv_metadata`` over the explicit file list (footers only);
- ``pyarrow``: ``pyarrow.parquet.read_table`` of each file's bytes, one after the other;
- ``reader``: Arrow's Parquet reader over each file's bytes, footer parsed once, one thread
  (what ftaudit's loader does per file, :func:`ftaudit.eventlog.reader.open_parquet`,
  without its checks);
- ``duckdb``: DuckDB's ``read_parquet`` of the file list, every column into Arrow;
- ``duckdb-shapes``: the same, one ``read_parquet`` per group of files that share one Arrow
  schema (no ``union_by_name``: what a loader handing DuckDB the files would do), on its
  threads.

Run one way per process (peak RSS is the process's): ``.venv/bin/python
benchmarks/segment_read_floor.py RUN_DIR HOW``. Results for the 100,000-segment pair are in
``results/segments_bench.md`` (day eight; ``reader`` and ``duckdb-shapes`` from day nine).
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.reader import open_parquet

HOW = ("hash", "footers", "pyarrow", "reader", "duckdb", "duckdb-shapes")


def by_schema(files: list[str]) -> list[list[str]]:
    """The files grouped by their Arrow schema (footers read once, before the timing: a
    loader knows them from its scan)."""
    shapes: dict[pa.Schema, list[str]] = {}
    for f in files:
        shapes.setdefault(pq.read_schema(f).remove_metadata(), []).append(f)
    return list(shapes.values())


def read_all(files: list[str] | list[list[str]], how: str) -> int:
    """Read ``files`` one way; returns the bytes or rows read (so nothing is skipped)."""
    if how == "hash":
        return sum(len(hashlib.sha256(Path(f).read_bytes()).digest()) for f in files)
    if how == "pyarrow":
        return sum(pq.read_table(pa.BufferReader(Path(f).read_bytes())).num_rows for f in files)
    if how == "reader":
        return sum(
            open_parquet(Path(f).read_bytes()).read_all(use_threads=False).num_rows for f in files
        )
    con = duckdb.connect()
    if how == "footers":
        return con.execute("SELECT count(*) FROM parquet_kv_metadata(?)", [files]).fetchone()[0]
    if how == "duckdb-shapes":
        read = "SELECT * FROM read_parquet($files)"
        return sum(
            con.sql(read, params={"files": group}).to_arrow_table().num_rows for group in files
        )
    return (
        con.sql("SELECT * FROM read_parquet($files, union_by_name=true)", params={"files": files})
        .to_arrow_table()
        .num_rows
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("how", choices=HOW)
    args = parser.parse_args()
    files = sorted(str(p) for p in args.run_dir.glob("events/*/*.parquet"))
    count = len(files)
    if args.how == "duckdb-shapes":
        files = by_schema(files)
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    n = read_all(files, args.how)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(
        f"{args.how}: {count:,} files ({n:,} read) wall {wall:.1f} s, CPU {cpu:.1f} s, "
        f"peak RSS {after.ru_maxrss / 1024:,.0f} MB"
    )


if __name__ == "__main__":
    main()
