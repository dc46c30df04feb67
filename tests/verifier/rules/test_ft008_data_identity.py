"""FT008 beyond the cases: its note in every report, and incremental verification."""

from __future__ import annotations

from pathlib import Path

from ftaudit.verifier import verify
from ftaudit.verifier.render import render
from tests.verifier.rules.ft008_cases import CASES


def _build(tmp_path: Path, name: str) -> Path:
    """The run of FT008's case ``name``."""
    (case,) = [c for c in CASES if c.name == name]
    return case.write(tmp_path / "run")


def test_the_note_says_what_was_checked(tmp_path: Path) -> None:
    report = verify(_build(tmp_path, "shuffled"), select=["FT008"])
    (result,) = report.results
    assert result.checked == 6 and result.note.startswith("checked against dataset manifest")
    assert result.to_dict()["note"] == result.note
    assert f"FT008 note: {result.note}" in render(report, "text")


def test_incremental_keeps_the_declarations_and_says_what_it_left_out(tmp_path: Path) -> None:
    """The window of ``--since-step`` holds the declarations from before it (the order an
    epoch is read in carries no step): the changed order is found incrementally too."""
    run = _build(tmp_path, "order_changed_at_resume")
    full = verify(run, select=["FT008"])
    (result,) = verify(run, select=["FT008"], since_step=1).results
    assert "incremental verification" in result.note
    assert {v.kind for v in result.violations} == {"order_changed"}
    assert [v.to_dict() for v in result.violations] == [
        v.to_dict() for r in full.results for v in r.violations if v.kind == "order_changed"
    ]
