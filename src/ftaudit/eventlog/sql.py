"""Quoting for SQL that ftaudit builds: identifiers and literals, never pasted raw."""

from __future__ import annotations


def ident(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: str) -> str:
    """A single-quoted SQL string literal (for DDL, where parameters cannot be bound)."""
    return "'" + value.replace("'", "''") + "'"


def string_list(values: list[str]) -> str:
    """A SQL list literal of strings: ``['a', 'b']``."""
    return "[" + ", ".join(literal(v) for v in values) + "]"
