"""The shape of a rule case: how to build the run, and what the rule must report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tests.support.builder import RunBuilder


@dataclass(frozen=True)
class Expect:
    """One violation a case expects; fields left None are not checked."""

    ids: tuple[int, ...] | None = None
    samples: tuple[int, ...] | None = None
    step: int | None = None
    attempt: int | None = None
    cell: int | None = None
    instance: str | None = None
    severity: str = "error"
    kind: str | None = None
    text: str | None = None
    """A piece of the message."""


@dataclass(frozen=True)
class Case:
    """A named run and the violations ``rule`` must find in it (none: it passes)."""

    name: str
    rule: str
    build: Callable[[RunBuilder], None]
    expect: tuple[Expect, ...] = ()
    B: int = 20
    cells: int = 1
