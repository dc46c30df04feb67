"""``ftaudit synth``: a valid run verifies clean; each planted bug is caught by its rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from ftaudit.cli.app import app
from ftaudit.cli.verify_cmd import build_app
from ftaudit.dataset import read_manifest
from ftaudit.eventlog import StepEnd, WitnessSnapshot, read_records
from ftaudit.synth import BUGS, SynthBug, SynthConfig, SynthResult, plan, synthesize
from ftaudit.verifier import verify
from tests.synth.conftest import SMALL


def _check(result: Result, code: int) -> None:
    assert result.exit_code == code, (
        f"exit {result.exit_code}, expected {code}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr}\n--- exception ---\n{result.exception!r}"
    )


def test_valid_run_verifies_clean_with_ft_verify(small_run_dir: Path) -> None:
    result = CliRunner().invoke(build_app(), [str(small_run_dir)])
    _check(result, 0)
    assert "verified: all" in result.stdout


def test_valid_run_has_the_planned_shape(small_run: SynthResult) -> None:
    records = read_records(small_run.run_dir)
    incarnations = {r.envelope.incarnation for r in records}
    assert small_run.incarnations == len(incarnations) == 2
    assert small_run.events == len(records)
    writers = {r.envelope.writer.split(".")[0] for r in records}
    assert writers == {"driver"} | {
        f"trainer-actor-c{c}-r{r}" for c in range(SMALL.cells) for r in range(SMALL.ranks)
    }
    ends = [r.event for r in records if isinstance(r.event, StepEnd)]
    retried = {e.step for e in ends if e.accepted_attempt == 1}
    assert retried == set(small_run.retried_steps) and len(retried) == SMALL.retries
    # the crash rolled back some steps, which the next incarnation ran again
    (died_after, resumed_from) = small_run.crashes[0]
    assert died_after > resumed_from
    assert len(ends) == SMALL.steps + (died_after - resumed_from)
    snapshots = [r.event for r in records if isinstance(r.event, WitnessSnapshot)]
    assert len(snapshots) == len(ends) * SMALL.cells * SMALL.ranks * len(SMALL.instances)
    report = verify(small_run.run_dir)
    assert report.passed() and all(r.checked > 0 for r in report.results if r.code != "FT007")
    # every committed sample's content was checked against the run's own manifest
    ft008 = next(r for r in report.results if r.code == "FT008")
    assert ft008.checked == SMALL.steps * SMALL.samples_per_step * SMALL.ranks  # per feeding rank
    assert ft008.note.startswith("checked against dataset manifest")
    (manifest,) = (small_run.run_dir / "manifests").iterdir()
    assert read_manifest(manifest).size == SMALL.items == SMALL.steps * SMALL.samples_per_step


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b.name)
def test_each_bug_is_caught_by_its_rule(bug: SynthBug, tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, bug=bug.name)
    result = synthesize(tmp_path / "run", config)
    assert result.bug == bug and result.bug_step is not None
    report = verify(result.run_dir)
    failed = {r.code for r in report.results if r.errors}
    assert bug.rule in failed, f"{bug.name}: {report.to_dict()}"
    located = [
        v
        for r in report.results
        if r.code == bug.rule
        for v in r.violations
        # FT001 names no step; FT005 locates a duplicate at its first training, shown at
        # the later one
        if bug.rule == "FT001"
        or v.location.step is None
        or (v.location.step if v.shown_at is None else v.shown_at) >= result.bug_step
    ]
    assert located, f"{bug.name}: no {bug.rule} violation at or after step {result.bug_step}"


@pytest.mark.parametrize(
    "name", ["peer_shard_content", "wrong_items_after_resume", "epoch_restarted_after_resume"]
)
def test_data_bugs_fail_ft008_alone_naming_the_items(name: str, tmp_path: Path) -> None:
    """Right sample indices, wrong content: only the fingerprints can tell."""
    result = synthesize(tmp_path / "run", dataclasses.replace(SMALL, bug=name))
    report = verify(result.run_dir)
    assert {r.code for r in report.results if r.errors} == {"FT008"}, report.to_dict()
    wrong = [
        v
        for r in report.results
        for v in r.violations
        if r.code == "FT008" and v.kind == "wrong_content"
    ]
    assert wrong and all(v.location.step >= result.bug_step for v in wrong)
    assert all("should be item" in v.message and "content is item" in v.message for v in wrong)


def test_a_run_without_fingerprints_passes_ft008_with_a_note(tmp_path: Path) -> None:
    config = dataclasses.replace(SMALL, steps=6, restarts=0, retries=0, fingerprints=False)
    report = verify(synthesize(tmp_path / "run", config).run_dir)
    assert report.passed(), report.to_dict()
    ft008 = next(r for r in report.results if r.code == "FT008")
    assert ft008.checked == 0 and "no sample fingerprints" in ft008.note
    assert not (tmp_path / "run" / "manifests").exists()


def test_a_run_without_a_manifest_finds_a_restarted_epoch_by_its_repeats(
    tmp_path: Path,
) -> None:
    """``--no-manifest``: fingerprints but no dataset manifest. A resumed loader that reads
    its epoch again from the first item is then seen only as contents trained twice."""
    run = tmp_path / "run"
    args = ["synth", str(run), "--steps", "16", "--bug", "epoch_restarted_after_resume"]
    _check(CliRunner().invoke(app, [*args, "--no-manifest"]), 0)
    assert not (run / "manifests").exists()
    ft008 = next(r for r in verify(run).results if r.code == "FT008")
    assert ft008.note.startswith("no dataset manifest")
    assert ft008.violations and {v.kind for v in ft008.violations} == {"duplicate_content"}


def test_synth_command_writes_a_run_that_verifies(tmp_path: Path) -> None:
    runner = CliRunner()
    run = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            *("synth", str(run), "--steps", "12", "--cells", "3", "--ranks", "1", "-B", "4096"),
            *("--samples-per-step", "100", "--restarts", "1", "--retries", "1", "--seed", "3"),
        ],
    )
    _check(result, 0)
    assert result.stdout == ""
    assert "ftaudit synth:" in result.stderr and "2 incarnation(s)" in result.stderr
    _check(runner.invoke(app, ["verify", str(run)]), 0)


def test_synth_command_with_a_bug_fails_verification(tmp_path: Path) -> None:
    runner = CliRunner()
    run = tmp_path / "run"
    # the canonical name is snake_case; the dashed spelling of earlier versions still works
    result = runner.invoke(app, ["synth", str(run), "--steps", "8", "--bug", "missing-sample"])
    _check(result, 0)
    assert "bug missing_sample at step 5 (expect FT004)" in result.stderr
    verdict = runner.invoke(app, ["verify", str(run), "--format", "json"])
    _check(verdict, 1)
    assert '"FT004"' in verdict.stdout


def test_list_bugs(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synth", "--list-bugs"])
    _check(result, 0)
    lines = result.stdout.splitlines()
    assert [line.split("\t")[:2] for line in lines] == [[b.name, b.rule] for b in BUGS]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--samples-per-step", "40000"], "use a larger buffer size"),
        (["--bug", "no-such-bug"], "unknown synth bug 'no-such-bug'"),
        (["--bug", "checksum_mismatch", "--cells", "1"], "needs at least 2 cells"),
        (["--bug", "peer_shard_content", "--no-fingerprints"], "needs fingerprints"),
        (["--dataset-size", "10"], "cannot fill a step of 1024 distinct samples"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["synth", str(tmp_path / "run"), *args])
    _check(result, 2)
    assert message in result.stderr
    assert not (tmp_path / "run").exists()


def test_refuses_a_directory_that_holds_a_run(small_run_dir: Path) -> None:
    result = CliRunner().invoke(app, ["synth", str(small_run_dir), "--steps", "2"])
    _check(result, 2)
    assert "already holds a run" in result.stderr


def test_plan_puts_restart_bugs_on_the_last_resume() -> None:
    config = SynthConfig(steps=40, restarts=2, bug="reissued_ids", checkpoint_every=4)
    p = plan(config)
    assert len(p.crashes) == 2
    assert p.bug_step == p.crashes[-1][1] + 1
    # a restart bug forces a restart even when none was asked for
    assert plan(dataclasses.replace(config, restarts=0)).crashes
