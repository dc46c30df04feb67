"""Query rows as Python dicts straight from DuckDB, equal to what the Arrow path gives.

``con.sql(q).to_arrow_table().to_pylist()`` binds a SELECT once to describe the lazy
relation and again to run it; on a small run that second planning was about a quarter of
the rules' query time. ``con.execute(q).fetchall()`` plans once, but DuckDB's Python
values differ from Arrow's for a few types: a MAP is a dict there and a list of
``(key, value)`` pairs in Arrow, a HUGEINT (``sum`` of BIGINTs) an ``int`` there and a
``Decimal`` in Arrow. :func:`row_maker` converts those, so the rules see the very values
they saw before; for any type whose values it does not know to be equal (timestamps,
intervals, UUIDs, enums, fixed-size arrays...) it returns None and the caller takes the
Arrow path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

Convert = Callable[[Any], Any]
Rows = list[dict[str, Any]]
MakeRows = Callable[[list[tuple[Any, ...]]], Rows]

SAME_VALUES = frozenset(
    {
        "null",
        "boolean",
        "tinyint",
        "smallint",
        "integer",
        "bigint",
        "utinyint",
        "usmallint",
        "uinteger",
        "ubigint",
        "double",
        "decimal",
        "varchar",
        "blob",
    }
)
"""DuckDB type ids whose Python value is the one Arrow's ``to_pylist`` gives."""


def _same(value: Any) -> Any:
    return value


def _converter(duck_type: Any) -> Convert | None:
    """How to turn DuckDB's Python value of ``duck_type`` into Arrow's; None: unknown."""
    kind = duck_type.id
    if kind in SAME_VALUES:
        return _same
    if kind == "hugeint":
        return lambda v: None if v is None else Decimal(v)
    if kind == "list":
        item = _converter(duck_type.children[0][1])
        if item is None:
            return None
        if item is _same:
            return _same
        return lambda v: None if v is None else [item(x) for x in v]
    if kind == "struct":
        fields = [(name, _converter(t)) for name, t in duck_type.children]
        if any(c is None for _, c in fields):
            return None
        if all(c is _same for _, c in fields):
            return _same
        return lambda v: None if v is None else {n: c(v[n]) for n, c in fields}  # type: ignore[misc]
    if kind == "map":
        key, value = (_converter(t) for _, t in duck_type.children)
        if key is None or value is None:
            return None
        return lambda v: None if v is None else [(key(k), value(x)) for k, x in v.items()]
    return None


def row_maker(description: Sequence[Sequence[Any]]) -> MakeRows | None:
    """A function from ``fetchall()`` rows to Arrow-equal dicts for a cursor's
    ``description``; None when a column's type is not known to convert exactly (or two
    columns share a name), so that the caller reads the result through Arrow instead."""
    names = [d[0] for d in description]
    if len(set(names)) != len(names):
        return None
    converters = [_converter(d[1]) for d in description]
    if any(c is None for c in converters):
        return None
    if all(c is _same for c in converters):
        return lambda fetched: [dict(zip(names, row, strict=True)) for row in fetched]
    pairs = list(zip(names, converters, strict=True))
    return lambda fetched: [
        {n: c(v) for (n, c), v in zip(pairs, row, strict=True)}  # type: ignore[misc]
        for row in fetched
    ]


__all__ = ["SAME_VALUES", "row_maker"]
