"""Values from DuckDB as CSV, JSON and table text: NaN stays visible, NULL stays empty."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

from ftaudit.cli.rows import jsonable, to_csv, to_json, to_table


def test_non_finite_floats_become_strings_in_strict_json() -> None:
    doc = json.loads(to_json(["v"], [(float("nan"),), (float("inf"),), (-float("inf"),)]))
    assert [r["v"] for r in doc] == ["NaN", "Infinity", "-Infinity"]


def test_jsonable_handles_duckdb_value_types() -> None:
    ts = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert jsonable(ts) == "2025-01-02T03:04:05+00:00"
    assert jsonable(Decimal("1.10")) == "1.10"
    assert jsonable(b"\x01\xff") == "01ff"
    assert jsonable({1: [1.5, None]}) == {"1": [1.5, None]}


def test_csv_writes_null_as_empty_and_nested_as_json() -> None:
    text = to_csv(["a", "b"], [(None, {"x": [1, 2]}), ('q,"r', 3)])
    assert text == 'a,b\n,"{""x"": [1, 2]}"\n"q,""r",3\n'


def test_table_sized_to_content_has_no_trailing_padding() -> None:
    text = to_table(["name", "value"], [("loss", 0.5)], color=False, width=None)
    assert all(line == line.rstrip() for line in text.splitlines())
    assert text.splitlines()[0].split() == ["name", "value"]
