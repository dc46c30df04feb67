"""``ft-verify``'s options, declared once, and a lean parser for the plain command lines.

Typer declares each option of ``ft-verify`` from :data:`OPTIONS` (``ftaudit.cli.verify_app``)
and draws ``--help`` and every usage error from them. A gate that runs ``ft-verify`` after
every step pays typer's start-up each time: importing it, then one pydantic adapter per
option at parse time (about 0.1 s of a 0.7 s run). :func:`parse_plain` reads the same
declarations and parses the command lines it is sure of, the ones a gate writes:
``RUN_DIR`` once, long options as ``--name VALUE`` or ``--name=VALUE``, ``-f``/``-o`` with a
separate value, flags, canonical numbers and lower-case formats. Anything else (``--help``,
``--version``, an unknown or repeated option, a value that typer would convert or refuse
in its own way) gives ``None``, and typer parses the line: what a user sees on anything
unusual is typer's, word for word. A test holds the two parsers to the same arguments.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal


class ReportFormat(StrEnum):
    """The report formats (mirrors ``ftaudit.verifier.render.FORMATS``, kept light here)."""

    TEXT = "text"
    JSON = "json"
    JUNIT = "junit"
    MARKDOWN = "markdown"


FORMATS = frozenset(f.value for f in ReportFormat)

Kind = Literal["format", "path", "paths", "names", "flag", "step", "seconds", "share"]
"""How an option's value is read: one report format, one path, repeatable paths or names, a
flag, a step number (an int >= ``minimum``), seconds (a float >= ``minimum``) or a share
(a float from ``minimum`` to ``maximum``)."""


@dataclass(frozen=True)
class Option:
    """One option of ``ft-verify``: its names, what its value is, and its help text."""

    field: str
    """The :class:`VerifyArgs` field (and the typer parameter) it sets."""
    decls: tuple[str, ...]
    kind: Kind
    help: str
    metavar: str | None = None
    minimum: float | None = None
    maximum: float | None = None


RUN_DIR_HELP = "The run directory (the folder holding events/)."

FORMAT = Option("fmt", ("--format", "-f"), "format", "Report format.")
OUTPUT = Option(
    "output", ("--output", "-o"), "path", "Write the report to FILE instead of stdout.", "FILE"
)
RULE = Option(
    "rule",
    ("--rule",),
    "names",
    "Run only this rule (code or name, e.g. FT004); repeatable.",
    "CODE_OR_NAME",
)
SKIP_RULE = Option(
    "skip_rule",
    ("--skip-rule",),
    "names",
    "Do not run this rule (code or name); repeatable.",
    "CODE_OR_NAME",
)
STRICT = Option("strict", ("--strict",), "flag", "Warnings fail too (exit 1), not only errors.")
SINCE_STEP = Option(
    "since_step",
    ("--since-step",),
    "step",
    "Incremental: check only steps >= K (earlier ones were checked before); "
    "reads only the segments those steps need.",
    "K",
    minimum=0,
)
FOLLOW = Option(
    "follow",
    ("--follow",),
    "flag",
    "Follow a live run: judge its steps as they settle (provisional, on "
    "stderr) and print the final report once it finished; the run directory may "
    "not exist yet. Ctrl-C stops it (exit 130).",
)
INTERVAL = Option(
    "interval",
    ("--interval",),
    "seconds",
    "With --follow: how long to wait between two looks at the run.",
    "SECONDS",
    minimum=0.01,
)
CPU_SHARE = Option(
    "cpu_share",
    ("--cpu-share",),
    "share",
    "With --follow: the largest share of one core the follower may take, from 0.001 "
    "to 1 (0.01: 1%). After a poll that took C seconds of CPU the next one waits until "
    "C / SHARE seconds after it began (at least --interval): steps are judged later, "
    "none is skipped.",
    "SHARE",
    minimum=0.001,
    maximum=1.0,
)
DATA_MANIFEST = Option(
    "data_manifest",
    ("--data-manifest",),
    "paths",
    "A dataset manifest kept outside the run (found by the digest the run "
    "names; FT008); repeatable.",
    "FILE",
)
REQUIRE_FINISHED = Option(
    "require_finished",
    ("--require-finished",),
    "flag",
    "Fail a run whose last incarnation logged no run_finished (crashed, still "
    "running, or its end deleted); name writers no record vouches for.",
)
FALLBACK_DIR = Option(
    "fallback",
    ("--fallback-dir",),
    "paths",
    "Also read writers' last-chance records (lost events) from DIR; repeatable "
    "(always read: $FTAUDIT_FALLBACK_DIR, else <temp dir>/ftaudit-fallback).",
    "DIR",
)
MANIFEST = Option(
    "manifest",
    ("--manifest",),
    "path",
    "A seal from 'ftaudit seal', kept outside the run: every writer must still "
    "reach its sealed head, and no writer may be added.",
    "SEAL",
)
KEY_FILE = Option(
    "key_file",
    ("--key-file",),
    "path",
    "The run's HMAC key: segments and checkpoint records must carry MACs made "
    "with it, and a signed seal is checked with it (default: $FTAUDIT_HMAC_KEY_FILE "
    "or $FTAUDIT_HMAC_KEY).",
    "FILE",
)

OPTIONS = (
    FORMAT,
    OUTPUT,
    RULE,
    SKIP_RULE,
    STRICT,
    SINCE_STEP,
    FOLLOW,
    INTERVAL,
    CPU_SHARE,
    DATA_MANIFEST,
    REQUIRE_FINISHED,
    FALLBACK_DIR,
    MANIFEST,
    KEY_FILE,
)
"""Every option but ``--version`` and ``--help`` (typer's own: they always go to typer)."""

DEFAULT_INTERVAL = 1.0

COMPLETION_ENV = "_FT_VERIFY_COMPLETE"
"""Set by a shell asking click for completions: typer answers it, so it gets the line."""

_STEP = re.compile(r"[0-9]+")
_SECONDS = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")
"""Numbers written the one way every parser reads alike (no sign, exponent, ``_`` or space)."""


@dataclass(frozen=True)
class VerifyArgs:
    """One ``ft-verify`` invocation, parsed (by typer or by :func:`parse_plain`)."""

    run_dir: Path
    fmt: ReportFormat = ReportFormat.TEXT
    output: Path | None = None
    rule: tuple[str, ...] = ()
    skip_rule: tuple[str, ...] = ()
    strict: bool = False
    since_step: int | None = None
    follow: bool = False
    interval: float = DEFAULT_INTERVAL
    cpu_share: float | None = None
    data_manifest: tuple[Path, ...] = ()
    require_finished: bool = False
    fallback: tuple[Path, ...] = ()
    manifest: Path | None = None
    key_file: Path | None = None


def parse_plain(argv: list[str]) -> VerifyArgs | None:
    """``argv`` (without the program name) as :class:`VerifyArgs`, or ``None`` for typer."""
    if os.environ.get(COMPLETION_ENV):
        return None
    names = {decl: option for option in OPTIONS for decl in option.decls}
    values: dict[str, object] = {}
    run_dir: Path | None = None
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            if run_dir is not None or not arg:
                return None
            run_dir = Path(arg)
            continue
        name, attached, text = arg.partition("=")
        option = names.get(name)
        if option is None or (attached and not name.startswith("--")):
            return None
        if option.kind == "flag":
            if attached or option.field in values:
                return None
            values[option.field] = True
            continue
        if not attached:
            if not rest:
                return None
            text = rest.pop(0)
        value = _value(option, text)
        if value is None:
            return None
        if option.kind in ("paths", "names"):
            values[option.field] = (*values.get(option.field, ()), value)  # type: ignore[misc]
        elif option.field in values:
            return None
        else:
            values[option.field] = value
    if run_dir is None:
        return None
    return VerifyArgs(run_dir=run_dir, **values)  # type: ignore[arg-type]


def _value(option: Option, text: str) -> object | None:
    """``text`` read as ``option``'s value, or ``None`` where typer should judge it."""
    if not text or text.startswith("-"):
        return None
    if option.kind == "format":
        return ReportFormat(text) if text in FORMATS else None
    if option.kind in ("path", "paths"):
        return Path(text)
    if option.kind == "names":
        return text
    number: float | None = None
    if option.kind == "step" and _STEP.fullmatch(text):
        number = int(text)
    elif option.kind in ("seconds", "share") and _SECONDS.fullmatch(text):
        number = float(text)
    if number is None or (option.minimum is not None and number < option.minimum):
        return None
    if option.maximum is not None and number > option.maximum:
        return None
    return number
