"""The one format of a rule case: a named run, built with the run builder, and the
violations its rule must report in it (none: the run passes).

Each rule ``FTnnn`` has its cases in ``ftnnn_cases.py`` beside this module: ``RULE``
names the rule and ``CASES`` lists its ``Case``s; ``test_rule_cases.py`` runs them all.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.support.builder import RunBuilder

Build = Callable[[RunBuilder], None]
"""Writes a case's run with the builder."""


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
    """A named run and the violations its rule must find in it (none: it passes)."""

    name: str
    build: Build
    expect: tuple[Expect, ...] = ()
    B: int = 20
    cells: int = 1

    @property
    def id(self) -> str:
        """The name as a test id: lower case, words joined by underscores."""
        return re.sub(r"[^0-9a-z.]+", "_", self.name.lower()).strip("_")

    def write(self, root: Path) -> Path:
        """Build this case's run directory at ``root`` (real Parquet segments)."""
        builder = RunBuilder(root, B=self.B, cells=self.cells)
        try:
            self.build(builder)
        finally:
            builder.close()
        return root
