"""``ftaudit compare``: committed metrics of a run with faults against a run without."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ftaudit.errors import UnusableInputError
from ftaudit.verifier.compare import Kind, Reduce, committed_metrics, compare_runs
from tests.report.runs import STEPS, loss_at, write_clean_run, write_faulty_run
from tests.support.cli import Invoke, check_exit


@pytest.fixture(scope="module")
def diverged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Fault-free, but its loss drifts from step 5 on (a training bug)."""
    return write_clean_run(tmp_path_factory.mktemp("diverged") / "run", diverge_at=5)


@pytest.fixture(scope="module")
def nan_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The faulty run with a NaN committed loss at step 6."""
    return write_faulty_run(tmp_path_factory.mktemp("nan") / "run", nan_at=6)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_clean_run(tmp_path_factory.mktemp("short") / "run", steps=6)


def test_only_the_committed_history_counts(faulty_run: Path) -> None:
    loss = committed_metrics(faulty_run, Reduce.SUM)["loss"]
    assert sorted(loss) == list(range(STEPS))
    # step 2's retried attempt logged NaN and step 4's rolled-back attempt a worse loss:
    # neither is committed
    assert loss[2] == pytest.approx(loss_at(2)) and loss[4] == pytest.approx(loss_at(4))


def test_faults_against_no_faults_are_equivalent(faulty_run: Path, clean_run: Path) -> None:
    result = compare_runs(clean_run, faulty_run, reduce=Reduce.SUM)
    assert result.passed, result.differences
    assert [(m.name, m.steps) for m in result.metrics] == [("loss", 8), ("samples", 8)]


def test_the_reduction_matters_when_cells_come_and_go(faulty_run: Path, clean_run: Path) -> None:
    # each cell logs its share; at step 2 one cell trained the whole batch, so the mean
    # over writers doubles there while the sum stays the global value
    result = compare_runs(clean_run, faulty_run, reduce=Reduce.MEAN)
    assert {(d.metric, d.step, d.kind) for d in result.differences} == {
        ("loss", 2, Kind.VALUE),
        ("samples", 2, Kind.VALUE),
    }


def test_divergence_is_reported_where_it_starts(clean_run: Path, diverged_run: Path) -> None:
    result = compare_runs(clean_run, diverged_run, metrics=("loss",))
    assert not result.passed
    assert [d.step for d in result.differences] == [5, 6, 7]
    first = result.differences[0]
    assert first.kind is Kind.VALUE and first.baseline == pytest.approx(loss_at(5) / 2)
    assert "loss at step 5: baseline" in first.message and "allowed" in first.message
    # a loose enough tolerance accepts the drift
    assert compare_runs(clean_run, diverged_run, metrics=("loss",), atol=0.2).passed


def test_nan_on_one_side_only_is_a_difference(nan_run: Path, clean_run: Path) -> None:
    result = compare_runs(clean_run, nan_run, reduce=Reduce.SUM)
    assert [(d.metric, d.step, d.kind) for d in result.differences] == [("loss", 6, Kind.NAN)]
    assert math.isnan(result.differences[0].target or 0.0)
    # NaN on both sides at the same step is equal
    assert compare_runs(nan_run, nan_run).passed


def test_missing_steps_and_metrics_are_reported(clean_run: Path, short_run: Path) -> None:
    result = compare_runs(clean_run, short_run, metrics=("loss",))
    assert [(d.step, d.kind) for d in result.differences] == [
        (6, Kind.MISSING_STEP),
        (7, Kind.MISSING_STEP),
    ]
    assert "no committed value in the target run" in result.differences[0].message
    reverse = compare_runs(short_run, clean_run, metrics=("loss",))
    assert "no committed value in the baseline run" in reverse.differences[0].message


def test_glob_selects_metrics(clean_run: Path, faulty_run: Path) -> None:
    result = compare_runs(clean_run, faulty_run, metrics=("samp*",), reduce=Reduce.SUM)
    assert [m.name for m in result.metrics] == ["samples"]
    assert compare_runs(clean_run, faulty_run, metrics=("nothing*",)).metrics == ()


def test_an_unreadable_run_raises(clean_run: Path, tmp_path: Path) -> None:
    with pytest.raises(UnusableInputError):
        compare_runs(clean_run, tmp_path / "missing")


# -- the command ----------------------------------------------------------------------


def test_compare_command_exit_codes(
    ftaudit: Invoke, clean_run: Path, faulty_run: Path, diverged_run: Path, tmp_path: Path
) -> None:
    ok = ftaudit("compare", clean_run, faulty_run, "--reduce", "sum")
    check_exit(ok, 0)
    assert "equivalent: 2 metrics agree at 16 committed step values" in ok.stdout
    bad = ftaudit("compare", clean_run, diverged_run, "--metrics", "loss")
    check_exit(bad, 1)
    assert "Differences of 3" in bad.stdout and "loss at step 5" in bad.stdout
    assert "DIFFERENT: 3 differences in 1 of 1 metric" in bad.stdout
    check_exit(ftaudit("compare", clean_run, tmp_path / "missing"), 2)
    nothing = ftaudit("compare", clean_run, faulty_run, "--metrics", "eval/*")
    check_exit(nothing, 2)
    assert "nothing to compare" in nothing.stderr
    check_exit(ftaudit("compare", clean_run, faulty_run, "--rtol", "-1"), 2)


def test_compare_json_output(
    ftaudit: Invoke, clean_run: Path, diverged_run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "cmp.json"
    result = ftaudit("compare", clean_run, diverged_run, "--rtol", "1e-6", "-f", "json", "-o", out)
    check_exit(result, 1)
    data = json.loads(out.read_text())
    assert data["passed"] is False and data["rtol"] == 1e-6
    assert {d["step"] for d in data["differences"] if d["metric"] == "loss"} == {5, 6, 7}
    assert "DIFFERENT" in result.stderr


def test_compare_json_keeps_nan_readable(ftaudit: Invoke, clean_run: Path, nan_run: Path) -> None:
    result = ftaudit("compare", clean_run, nan_run, "--reduce", "sum", "-f", "json")
    check_exit(result, 1)
    (diff,) = json.loads(result.stdout)["differences"]
    assert diff["target"] == "nan" and diff["kind"] == "nan"
