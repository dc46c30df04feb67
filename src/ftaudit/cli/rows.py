"""Query results as text: a terminal table, CSV or JSON (for ``ftaudit sql``).

Values come from DuckDB as Python objects (datetimes, dicts for MAP and STRUCT, lists,
Decimals, NaN floats). JSON has no NaN or infinity, so those become the strings
``"NaN"``, ``"Infinity"`` and ``"-Infinity"``: a NaN loss stays visible instead of
turning into ``null`` or invalid JSON.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (see the module docstring for non-finite floats)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    return str(value)


def cell_text(value: Any) -> str:
    """One value as table or CSV text: NULL as empty, nested values as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict | list | tuple):
        return json.dumps(jsonable(value), allow_nan=False)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def to_json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A JSON array with one object per row (keys in column order)."""
    records = [dict(zip(columns, map(jsonable, row), strict=True)) for row in rows]
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


def to_csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """RFC 4180 CSV with a header row; NULL is an empty field."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([cell_text(v) for v in row])
    return out.getvalue()


def to_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    color: bool,
    width: int | None,
    group_first: bool = False,
) -> str:
    """A rich table as a string. ``width=None`` sizes it to its content (pipes, files).

    ``group_first`` shows the first column only when it changes, with a rule between
    groups (the view listing: each view once, then its columns).
    """
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from ftaudit.console import string_console

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    start = previous = object()
    for row in rows:
        cells = [Text(cell_text(v), style="dim" if v is None else "") for v in row]
        if group_first and row:
            if previous is not start and row[0] == previous:
                cells[0] = Text("")
            elif previous is not start:
                table.add_section()
            previous = row[0]
        table.add_row(*cells)
    console, out = string_console(color=color, width=width or 100_000)
    console.print(table)
    if width is None:  # sized to content: drop the padding up to the huge console width
        return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
    return out.getvalue()
