"""Seeded random reports for holding two renderings of one report to the same bytes."""

from __future__ import annotations

import random

from ftaudit.verifier.findings import Location, Report, RuleResult, Severity, Violation

PIECES = (
    "step",
    "witness-exactly-once",
    "x" * 70,
    "  two  spaces ",
    "[bold]markup[/bold]",
    "tab\there",
    "bell\x07",
    "cr\rhere",
    "é",
    "宽字",
    "·",
    "─",
    "trailing ",
    " leading",
    "",
)
"""Text the random reports are made of: plain words, long ones, markup, tabs, control
codes, accented, wide and box-drawing characters, leading and trailing spaces."""


def _text(rng: random.Random, plain: bool) -> str:
    """A random string; ``plain``: of the plain pieces only (short printable ASCII)."""
    pool = PIECES[:2] + PIECES[3:5] + PIECES[-3:] if plain else PIECES
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, 4)))


def random_report(seed: int) -> Report:
    """A report of 0-13 rules with random names, counts, notes and violations; most seeds
    give plain text only (what runs produce), one in three anything in :data:`PIECES`."""
    rng = random.Random(seed)
    plain = seed % 3 != 0
    results = []
    for n in range(rng.choice((0, 1, 3, 12, 13))):
        violations = tuple(
            Violation(
                code=f"FT{n:03d}",
                severity=rng.choice((Severity.ERROR, Severity.WARNING)),
                message=_text(rng, plain),
                location=Location(step=rng.choice((None, 3)), instance=rng.choice((None, "i"))),
                ids=tuple(range(rng.choice((0, 1, 5)))),
                details=tuple(_text(rng, plain) for _ in range(rng.choice((0, 2, 12)))),
                kind=rng.choice(("missing", "unspecified")),
            )
            for _ in range(rng.choice((0, 0, 1, 3, 14)))
        )
        results.append(
            RuleResult(
                code=f"FT{n:03d}",
                name=rng.choice(("log-integrity", "witness-exactly-once", "ft", _text(rng, plain))),
                checked=rng.choice((0, 7, 12288, 10**12)),
                violations=violations,
                seconds=rng.choice((0.0, 0.0003, 0.012, 1.5, 4000.0)),
                note=rng.choice(("", "", "checked against manifest 70ad", _text(rng, plain))),
            )
        )
    run_dir = rng.choice(("/tmp/run", "/r", "/runs/" + "d" * 120, "/r/" + _text(rng, plain)))
    return Report(run_dir=run_dir, results=tuple(results))
