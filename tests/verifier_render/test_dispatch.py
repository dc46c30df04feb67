"""``render`` knows exactly the formats the CLI offers."""

from __future__ import annotations

import pytest

from ftaudit.cli.verify_cmd import ReportFormat
from ftaudit.verifier.findings import Report
from ftaudit.verifier.render import FORMATS, render


def test_cli_formats_match_the_renderers() -> None:
    assert tuple(f.value for f in ReportFormat) == FORMATS


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_ends_with_a_newline(fmt: str, passing: Report) -> None:
    assert render(passing, fmt).endswith("\n")


def test_unknown_format_is_refused(passing: Report) -> None:
    with pytest.raises(ValueError, match="unknown report format 'yaml'"):
        render(passing, "yaml")
