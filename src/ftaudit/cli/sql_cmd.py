"""``ftaudit sql RUN_DIR [QUERY]``: ask DuckDB about a run, in a sandbox.

The run's segments are loaded into memory, then DuckDB's external access is switched off
and its configuration locked (``ftaudit.connect(..., sandbox=True)``): a query sees the
run's views and nothing else, and can neither write files nor read any outside the run.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import Terminal, emit, guarded, say

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


DEFAULT_TIMEOUT_S = 60.0
"""``--timeout``: a query still running after this long is stopped (exit 3)."""

DEFAULT_MAX_ROWS = 100_000
"""``--max-rows``: a result longer than this is not printed (exit 3); 0 lifts the cap."""


def run_query(
    con: duckdb.DuckDBPyConnection,
    query: str,
    *,
    timeout_s: float | None = None,
    max_rows: int = 0,
) -> Rows:
    """Column names and rows of ``query`` (of its last statement, if several).

    A query still running after ``timeout_s`` is interrupted; a result of more than
    ``max_rows`` rows (when positive) is refused before it is fetched whole. Raises
    :class:`ftaudit.errors.QueryError` with a one-line reason, e.g. DuckDB's message for
    the sandbox's "file system operations are disabled by configuration".
    """
    import threading

    import duckdb

    from ftaudit.errors import QueryError

    timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description or ()]
        rows = cursor.fetchmany(max_rows + 1) if max_rows > 0 else cursor.fetchall()
    except duckdb.Error as exc:
        if timer is not None and timer.finished.is_set():
            raise QueryError(
                f"query stopped after {timeout_s:g} s (--timeout {timeout_s:g}); narrow it, "
                "or allow it longer with --timeout"
            ) from None
        raise QueryError(f"query failed: {exc}") from None
    finally:
        if timer is not None:
            timer.cancel()
    if max_rows > 0 and len(rows) > max_rows:
        raise QueryError(
            f"query returned more than {max_rows:,} rows (--max-rows {max_rows}); add a LIMIT, "
            "aggregate, or raise --max-rows (0: no cap)"
        )
    return columns, rows


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
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            metavar="SECONDS",
            min=0,
            help="Stop a query still running after this long (exit 3); 0: no limit.",
        ),
    ] = DEFAULT_TIMEOUT_S,
    max_rows: Annotated[
        int,
        typer.Option(
            "--max-rows",
            metavar="N",
            min=0,
            help="Refuse a result of more than N rows (exit 3) instead of printing it; 0: no cap.",
        ),
    ] = DEFAULT_MAX_ROWS,
) -> None:
    """Query a run's events with SQL (read-only: no file access beyond the run).

    Without QUERY, list the views and their columns. Exit codes: 0 answered,
    2 unusable run directory, 3 query rejected, stopped by --timeout or longer than
    --max-rows, 130 interrupted (Ctrl-C).
    """
    import ftaudit

    con = guarded(lambda: ftaudit.connect(run_dir, sandbox=True))
    with con:
        listing = query is None or not query.strip()
        columns, rows = guarded(
            lambda: run_query(
                con,
                VIEWS_QUERY if listing else str(query),
                timeout_s=timeout or None,
                max_rows=max_rows,
            ),
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
    term = Terminal.detect()
    return render_rows.to_table(
        columns,
        rows,
        color=term.stdout_color,
        width=term.stdout_width if term.stdout_tty else None,
        group_first=group_first,
    )


__all__ = ["DEFAULT_MAX_ROWS", "DEFAULT_TIMEOUT_S", "VIEWS_QUERY", "RowFormat", "run_query", "sql"]
