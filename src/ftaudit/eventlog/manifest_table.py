"""The run's dataset manifests as DuckDB tables, for the ``manifest_items`` and
``fed_content`` views.

Each ``RUN_DIR/manifests/<digest>.parquet`` (written by :mod:`ftaudit.dataset`: columns
``item`` and ``fingerprint``, both int64) is opened by its exact path and copied into
memory before the sandbox is locked, so the views read no file. Two tables keep it
small: ``_manifests`` (a small id per manifest, its digest from the file name) and
``_manifest_items`` (id, item, fingerprint: 20 bytes per item). A file that is not a
readable manifest is left out: the SQL views show what the run holds, while rule FT008
judges the manifests (their digest, their size) and reports an unusable one.
"""

from __future__ import annotations

import os

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.reader import UNREADABLE
from ftaudit.eventlog.rundir import SEGMENT_SUFFIX, list_manifests
from ftaudit.eventlog.sql import ident

MANIFESTS = "_manifests"
MANIFEST_ITEMS = "_manifest_items"
_COLUMNS = pa.schema([("item", pa.int64()), ("fingerprint", pa.int64())])


def _read(path: os.PathLike[str]) -> pa.Table | None:
    """The manifest's item and fingerprint columns, or None if it is no readable manifest."""
    try:
        with open(path, "rb") as f:
            table = pq.ParquetFile(f).read(columns=["item", "fingerprint"])
    except (*UNREADABLE, KeyError):
        return None
    table = table.replace_schema_metadata(None)
    return table if table.schema.equals(_COLUMNS) else None


def create_manifest_tables(
    con: duckdb.DuckDBPyConnection, run_dir: str | os.PathLike[str], *, load: bool = True
) -> int:
    """Create the two manifest tables on ``con``; fill them from the run when ``load``.

    Returns how many manifests were loaded. ``load=False`` leaves the tables empty (the
    verifier's session: FT008 reads manifests itself, and a dataset of 10^8 items would
    cost 2 GB here).
    """
    con.execute(f"CREATE TABLE {ident(MANIFESTS)} (manifest INTEGER, digest VARCHAR)")
    con.execute(
        f"CREATE TABLE {ident(MANIFEST_ITEMS)} (manifest INTEGER, item BIGINT, fingerprint BIGINT)"
    )
    if not load:
        return 0
    loaded = 0
    source = "_ftaudit_manifest_rows"
    for path in list_manifests(run_dir):
        table = _read(path)
        if table is None:
            continue
        digest = path.name[: -len(SEGMENT_SUFFIX)]
        con.execute(f"INSERT INTO {ident(MANIFESTS)} VALUES (?, ?)", [loaded, digest])
        con.register(source, table)
        try:
            con.execute(
                f"INSERT INTO {ident(MANIFEST_ITEMS)} SELECT ?, item, fingerprint "
                f"FROM {ident(source)}",
                [loaded],
            )
        finally:
            con.unregister(source)
        loaded += 1
    return loaded
