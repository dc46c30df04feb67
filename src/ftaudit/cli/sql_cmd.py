"""``ftaudit sql RUN_DIR [QUERY]``: ask DuckDB about a run, in a sandbox.

The run's segments are loaded into memory, then DuckDB's external access is switched off
and its configuration locked (``ftaudit.connect(..., sandbox=True)``): a query sees the
run's views and nothing else, and can neither write files nor read any outside the run.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import color_enabled, emit, guarded, output_width, say

if TYPE_CHECKING:
    import duckdb

VIEWS_QUERY = """
    SELECT c.table_name AS view, c.column_name AS column, c.data_type AS type
    FROM information_schema.columns AS c
    JOIN information_schema.tables AS t
      USING (table_catalog, table_schema, table_name)
    WHERE t.table_type = 'VIEW' AND t.table_schema = 'main'
    ORDER BY c.table_name, c.ordinal_position
"""
"""The view listing shown when no query is given: every view with its columns, in order."""


class RowFormat(StrEnum):
    TABLE = "table"
    CSV = "csv"
    JSON = "json"


Rows = tuple[list[str], list[tuple[Any, ...]]]


def run_query(con: duckdb.DuckDBPyConnection, query: str) -> Rows:
    """Column names and rows of ``query`` (of its last statement, if several).

    Raises :class:`ftaudit.errors.QueryError` with DuckDB's message, e.g. the sandbox's
    "file system operations are disabled by configuration".
    """
    import duckdb

    from ftaudit.errors import QueryError

    try:
        cursor = con.execute(query)
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    except duckdb.Error as exc:
        raise QueryError(f"query failed: {exc}") from None


def sql(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    query: Annotated[
        str | None,
        typer.Argument(
            metavar="QUERY", help="A DuckDB SQL query over the run's views; omit it to list them."
        ),
    ] = None,
    fmt: Annotated[
        RowFormat, typer.Option("--format", "-f", help="Output format.", case_sensitive=False)
    ] = RowFormat.TABLE,
) -> None:
    """Query a run's events with SQL (read-only: no file access beyond the run).

    Without QUERY, list the views and their columns. Exit codes: 0 answered,
    2 unusable run directory, 3 query rejected.
    """
    import ftaudit

    con = guarded(lambda: ftaudit.connect(run_dir, sandbox=True))
    with con:
        listing = query is None or not query.strip()
        columns, rows = guarded(
            lambda: run_query(con, VIEWS_QUERY if listing else str(query)),
            ftaudit_code=exit_codes.QUERY_FAILED,
        )
    emit(_format(columns, rows, fmt, group_first=listing), None)
    if fmt is RowFormat.TABLE:
        say(f"({len(rows)} {'row' if len(rows) == 1 else 'rows'})")
    raise typer.Exit(exit_codes.OK)


def _format(
    columns: list[str], rows: list[tuple[Any, ...]], fmt: RowFormat, *, group_first: bool
) -> str:
    from ftaudit.cli import rows as render_rows

    if fmt is RowFormat.CSV:
        return render_rows.to_csv(columns, rows)
    if fmt is RowFormat.JSON:
        return render_rows.to_json(columns, rows)
    terminal = sys.stdout.isatty()
    return render_rows.to_table(
        columns,
        rows,
        color=terminal and color_enabled(sys.stdout),
        width=output_width(sys.stdout) if terminal else None,
        group_first=group_first,
    )


__all__ = ["VIEWS_QUERY", "RowFormat", "run_query", "sql"]
