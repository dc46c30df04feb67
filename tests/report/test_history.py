"""The run's history agrees with what the faulty run really did."""

from __future__ import annotations

from pathlib import Path

from ftaudit.verifier.history import collect


def test_attempts_carry_the_timeline_status_and_cell_outcomes(faulty_run: Path) -> None:
    pic = collect(faulty_run)
    status = {a.key: a.status for a in pic.attempts}
    assert status[(0, 2, 0)] == "retried"
    assert status[(0, 2, 1)] == "committed"
    assert status[(0, 4, 0)] == "rolled_back"
    assert status[(0, 5, 0)] == "unfinished"
    assert status[(1, 4, 0)] == "committed"
    retried = next(a for a in pic.attempts if a.key == (0, 2, 0))
    assert {c.cell: c.state for c in retried.cells} == {0: "discarded", 1: "errored"}
    assert pic.committed_steps == list(range(8))
    assert pic.retries() == 1


def test_incarnations_faults_heals_and_checkpoints(faulty_run: Path) -> None:
    pic = collect(faulty_run)
    first, second = pic.incarnations
    assert (first.resumed_iteration, first.status, first.last_step) == (None, "no end", 5)
    assert (second.resumed_iteration, second.resumed_incarnation) == (3, 0)
    assert second.status == "completed" and second.first_step == 4
    assert [(f.step, f.target) for f in pic.faults] == [(2, "cell 1"), (5, "driver")]
    heal = next(r for r in pic.reconfigs if r.healed_cells)
    assert (heal.step, heal.heal_source, heal.healed_cells) == (3, 0, (1,))
    restored = {(c.iteration, c.incarnation): c.resumed_by for c in pic.checkpoints}
    assert restored == {(1, 0): (), (3, 0): (1,), (5, 1): (), (7, 1): ()}
    assert pic.cells == (0, 1)


def test_metrics_keep_abandoned_points_and_nan(faulty_run: Path) -> None:
    pic = collect(faulty_run)
    loss = {(p.incarnation, p.step, p.attempt): p for p in pic.metrics["loss"]}
    assert loss[(0, 4, 0)].status == "rolled_back"
    assert loss[(0, 4, 0)].value > loss[(1, 4, 0)].value
    assert loss[(0, 2, 0)].status == "retried"
    assert loss[(0, 2, 0)].value != loss[(0, 2, 0)].value  # NaN kept
    assert loss[(0, 2, 1)].writers == 1 and loss[(0, 3, 0)].writers == 2


def test_coverage_matches_ft004(faulty_run: Path, lossy_run: Path) -> None:
    good = collect(faulty_run).coverage
    assert [c.step for c in good] == list(range(8))
    assert all(c.ok and c.expected == c.seen > 0 for c in good)
    bad = {c.step: c for c in collect(lossy_run).coverage}
    assert (bad[6].missing, bad[6].extra) == (1, 0)
    assert bad[6].seen == bad[6].expected - 1
    assert bad[5].ok
