"""``ft-verify --since-step K``: the verdict on steps >= K is the full verification's,
earlier violations are not reported again, and the cost follows the new events."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ftaudit.cli.verify_cmd import build_app
from ftaudit.synth import SynthResult, synthesize
from ftaudit.synth.bugs import BUGS
from ftaudit.verifier import Report, Violation, verify
from ftaudit.verifier.incremental import select
from tests.support.synth_runs import LOOKBACK

SHAPE = LOOKBACK


def _key(v: Violation) -> tuple[object, ...]:
    loc = v.location
    return (v.code, loc.step, loc.attempt, loc.incarnation, loc.cell, loc.instance, v.message)


def _stepped(report: Report, since: int) -> list[tuple[object, ...]]:
    return sorted(
        _key(v)
        for r in report.results
        for v in r.violations
        if v.location.step is not None and v.location.step >= since
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SynthResult]:
    root = tmp_path_factory.mktemp("incremental")
    return {
        name: synthesize(root / name, dataclasses.replace(SHAPE, bug=bug, bug_step=step))
        for name, bug, step in [
            ("valid", None, None),
            ("missing", "missing_sample", 33),
            ("checksum", "checksum_mismatch", 33),
            ("reissued", "reissued_ids", None),
        ]
    }


@pytest.fixture(scope="module")
def full_reports(runs: dict[str, SynthResult]) -> dict[str, Report]:
    return {name: verify(run.run_dir) for name, run in runs.items()}


@pytest.mark.parametrize(
    ("name", "since"),
    [
        ("valid", 20),
        pytest.param("missing", 27, marks=pytest.mark.slow),
        ("missing", 34),
        ("checksum", 33),
        pytest.param("checksum", 34, marks=pytest.mark.slow),
    ],
)
def test_verdict_on_new_steps_equals_the_full_verification(
    runs: dict[str, SynthResult], full_reports: dict[str, Report], name: str, since: int
) -> None:
    full = full_reports[name]
    incremental = verify(runs[name].run_dir, since_step=since)
    assert _stepped(incremental, since) == _stepped(full, since)
    assert incremental.passed() == (not _stepped(full, since))


def test_a_violation_before_k_is_not_reported_again(
    runs: dict[str, SynthResult], full_reports: dict[str, Report]
) -> None:
    run = runs["checksum"].run_dir
    assert not full_reports["checksum"].passed()  # step 33's replicas diverged
    later = verify(run, since_step=34)
    assert later.passed(), later.to_dict()
    # the same for a finding without a step: the bad resume of the last incarnation
    reissued = runs["reissued"]
    resumed_at = reissued.bug_step
    assert resumed_at is not None and resumed_at == reissued.crashes[-1][1] + 1
    assert not verify(reissued.run_dir, since_step=resumed_at).passed()
    assert verify(reissued.run_dir, since_step=resumed_at + 1).passed()


def test_ft_verify_since_step_exit_codes(runs: dict[str, SynthResult]) -> None:
    app = build_app()
    run = str(runs["checksum"].run_dir)
    bad = CliRunner().invoke(app, [run, "--since-step", "30"])
    assert bad.exit_code == 1, bad.stdout + bad.stderr
    assert "FT006" in bad.stdout and "step 33" in bad.stdout
    good = CliRunner().invoke(app, [run, "--since-step", "34"])
    assert good.exit_code == 0, good.stdout + good.stderr


@pytest.mark.slow
def test_cost_follows_the_new_events_not_the_history(tmp_path: Path) -> None:
    # not rolled: a live run's history is many small segments until its writers close,
    # which is where reading only the window pays
    shape = dataclasses.replace(SHAPE, restarts=0, retries=0, roll_segments=0)
    short = synthesize(tmp_path / "short", dataclasses.replace(shape, steps=40))
    long = synthesize(tmp_path / "long", dataclasses.replace(shape, steps=160))
    short_scan, short_window = select(short.run_dir, 39)
    long_scan, long_window = select(long.run_dir, 159)
    assert long_window.total_segments > 3 * short_window.total_segments
    # the same lookback (11 steps of ids in the window, give or take a retried step),
    # so about the same segments to read although the history is four times longer
    assert abs((39 - short_window.lookback) - (159 - long_window.lookback)) <= 1
    assert len(long_scan.segments) <= len(short_scan.segments) + 7  # one per writer
    assert len(long_scan.segments) < long_window.total_segments / 5
    assert verify(long.run_dir, since_step=159).passed()


ROLLED = dataclasses.replace(SHAPE, roll_segments=3)
"""Every writer rolls 3 flushes into one merged segment: most windows begin inside one,
which is read from the row the window needs on (``incremental.Kept``), not whole."""


def _found(report: Report, since: int) -> set[tuple[object, ...]]:
    """The violations at steps ``>= since`` by rule, kind, step, attempt and incarnation;
    not the cell nor the message: FT012 compares a changed parameter manifest with the
    earliest one loaded (the whole log: incarnation 0's; a window: another cell's)."""
    loc = [(v.code, v.kind, v.location) for r in report.results for v in r.violations]
    return {
        (code, kind, at.step, at.attempt, at.incarnation)
        for code, kind, at in loc
        if at.step is not None and at.step >= since
    }


def _rolled_agrees(tmp_path: Path, bug: str | None) -> None:
    from ftaudit.verifier.incremental import HEAD_ONLY, WINDOW_ONLY

    run = synthesize(tmp_path / "run", dataclasses.replace(ROLLED, bug=bug))
    full = verify(run.run_dir)
    cut = 0
    sinces = sorted({5, 13, 21, 29, 36, *((run.bug_step,) if run.bug_step else ())})
    for since in sinces:
        _, window = select(run.run_dir, since)
        cut += any(k not in (HEAD_ONLY, WINDOW_ONLY) for k in window.kept.values())
        incremental = verify(run.run_dir, since_step=since)
        assert _found(incremental, since) == _found(full, since), since
    assert cut >= 3  # windows did begin inside merged segments
    if bug is not None:
        assert not full.passed()


@pytest.mark.parametrize("bug", [None, "missing_sample", "reissued_ids", "stepped_twice"])
def test_a_window_beginning_inside_merged_segments_judges_as_the_full_verification(
    tmp_path: Path, bug: str | None
) -> None:
    _rolled_agrees(tmp_path, bug)


@pytest.mark.slow
@pytest.mark.parametrize("bug", [b.name for b in BUGS])
def test_every_synth_bug_over_merged_segments_judges_as_the_full_verification(
    tmp_path: Path, bug: str
) -> None:
    _rolled_agrees(tmp_path, bug)


def test_a_writer_is_complete_exactly_when_every_event_of_it_was_loaded(
    tmp_path: Path,
) -> None:
    """A window holds a trainer's segments from before ``since - 1`` for the witness
    window's types only, and a merged one from where its steps begin: such a writer is
    not complete (FT009 judges a rank's restore evidence only in a complete writer; a
    follower whose window moved past a resumed incarnation's first steps reported each
    of its ranks unrestored). Checked against the rows loaded, writer by writer."""
    from ftaudit.verifier.session import Session

    config = dataclasses.replace(LOOKBACK, checkpoint_every=4, roll_segments=3)
    run = synthesize(tmp_path / "run", config).run_dir
    seen = {True: 0, False: 0}
    for since in range(2, config.steps, 3):
        scan, scope = select(run, since)
        with Session.open(run, scan=scan, kept=scope.kept) as session:
            rows = session.rows("SELECT writer, count(*) AS n FROM events GROUP BY writer")
        loaded = {r["writer"]: r["n"] for r in rows}
        for writer, n in loaded.items():
            whole = n == scope.last_seq[writer] + 1
            assert scope.complete(writer) == whole, (since, writer, n)
            seen[whole] += 1
    assert seen[True] and seen[False]
