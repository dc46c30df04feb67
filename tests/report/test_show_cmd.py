"""``ftaudit show``: the terminal summary of a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.verifier import verify
from ftaudit.verifier.history import collect
from ftaudit.verifier.render.show import render_show
from ftaudit.verifier.rules import RULES
from tests.support.cli import Invoke, check_exit


def test_show_tells_the_story_of_the_faulty_run(ftaudit: Invoke, faulty_run: Path) -> None:
    result = ftaudit("show", faulty_run)
    check_exit(result, 0)
    out = result.stdout
    assert "2 incarnations, 8 committed steps, 11 attempts, 1 retry, 2 faults, 1 heal" in out
    assert "resumed from checkpoint 3 (saved" in out and "fresh start" in out
    for text in (
        "i0 a0 retried",
        "i0 a0 rolled back",
        "i0 a0 unfinished",
        "fault: sigkill cell 1",
        "heal: cell 1 from cell 0",
        "restored by incarnation 1",
        "0:normal 1:normal",
        "FT004",
        f"verified: all {len(RULES)} rules hold",
    ):
        assert text in out, f"{text!r} missing from:\n{out}"
    assert "\x1b[" not in out  # NO_COLOR (set for every test)


def test_show_folds_quiet_steps_and_shows_alive_cells(ftaudit: Invoke, clean_run: Path) -> None:
    result = ftaudit("show", clean_run)
    check_exit(result, 0)
    rows = [line.split() for line in result.stdout.splitlines()]
    # checkpoints at odd steps break the folding: 0, 1 (checkpoint), 2, 3 (checkpoint)...
    steps = [r[0] for r in rows if r and r[0][:1].isdigit() and len(r) > 2 and r[1] == "i0"]
    assert steps == ["0", "1", "2", "3", "4", "5", "6", "7"]
    step2 = next(r for r in rows if r and r[0] == "2")
    assert "0,1" in step2  # the alive cells of that step's quorum


def test_show_exits_1_on_violations_and_names_the_missing_step(
    ftaudit: Invoke, lossy_run: Path
) -> None:
    result = ftaudit("show", lossy_run)
    check_exit(result, 1)
    assert "step 6: 1 missing, 0 extra" in result.stdout
    assert "FAILED" in result.stdout


def test_show_exits_2_on_a_missing_run(ftaudit: Invoke, tmp_path: Path) -> None:
    result = ftaudit("show", tmp_path / "nope")
    check_exit(result, 2)
    assert result.stdout == "" and "error:" in result.stderr


def test_colour_only_when_asked(faulty_run: Path) -> None:
    pic, report = collect(faulty_run), verify(faulty_run)
    assert "\x1b[" in render_show(pic, report, color=True)
    assert "\x1b[" not in render_show(pic, report, color=False)


def test_show_and_report_load_the_run_once(
    ftaudit: Invoke, faulty_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ftaudit.verifier import session as session_module

    opened: list[Path] = []
    real_open = session_module.Session.open.__func__

    def counting_open(cls, run_dir, **kw):
        opened.append(Path(run_dir))
        return real_open(cls, run_dir, **kw)

    monkeypatch.setattr(session_module.Session, "open", classmethod(counting_open))
    check_exit(ftaudit("show", faulty_run), 0)
    check_exit(ftaudit("report", faulty_run, "-o", tmp_path / "page.html"), 0)
    assert opened == [faulty_run, faulty_run]  # one load per command: verdict and history
