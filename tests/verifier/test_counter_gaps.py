"""FT011 across a rank's gap, judged by a window: ``--since-step`` and a live follower.

A cell that crashes in step s sits that step out; healed (or replaced) after it, its
rank's next counter reading grows from its reading of step s - 1, older than the step
before the window (``since - 1``) that a window otherwise loads a trainer's rows from.
The demo's ``heal_without_scheduler`` is this shape: before the window kept the
readings back to ``T``, ``ft-verify --since-step 3`` and a follower missed its
``counter_went_back`` at step 3, which only the full verification reported.

A cell down for longer than the window reaches back (:data:`LONG`) left a follower with
no earlier reading in its window: it carries each rank's last reading that counted.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from ftaudit.eventlog import StepApplied
from ftaudit.verifier import Report, verify
from ftaudit.verifier.online import OnlineVerifier
from tests.support.builder import ERRORED, NORMAL, Incarnation, RunBuilder

STEPS = 6
CRASH = 2
"""Cell 1 crashes in this step; healed after it, it trains the next one again."""
LONG = 30
"""Steps a cell sits out in the long gap: more than a window reaches back (``T``, about
15 steps of 3 ids at B = 64)."""


def _step(run: Incarnation, step: int, counters: dict[int, int]) -> None:
    """One committed step: the cells of ``counters`` trained it and read those counters;
    the others crashed in it."""
    ids = run.alloc(step, [3 * step, 3 * step + 1, 3 * step + 2])
    cells = {cell: NORMAL if cell in counters else ERRORED for cell in range(2)}
    for cell, counter in counters.items():
        run.snapshot(step, ids, cell=cell)
        run.trainer(cell).log(
            StepApplied(step=step, attempt=0, cell=cell, rank=0, counters={"scheduler": counter})
        )
    run.step_end(step, cells)


def _run(
    root: Path, healed_counter: int, poll: Callable[[], None] = lambda: None, out: int = 1
) -> None:
    """Cell 1 sits out ``out`` steps from :data:`CRASH`; its reading after the next step
    is ``healed_counter`` (a correct heal: one more than its peer's before the step)."""
    b = RunBuilder(root, B=64, cells=2)
    run = b.start()
    back = CRASH + out
    for step in range(back + STEPS - CRASH - 1):
        counters = {0: step + 1}
        if step < CRASH:
            counters[1] = step + 1
        elif step >= back:
            counters[1] = healed_counter + step - back
        _step(run, step, counters)
        run.flush()
        poll()
    run.finish()
    b.close()


def _ft011(report: Report, since: int = 0) -> list[tuple[int | None, int | None, str]]:
    return sorted(
        (v.location.step, v.location.cell, v.kind)
        for r in report.results
        if r.code == "FT011"
        for v in r.violations
        if v.location.step is not None and v.location.step >= since
    )


@pytest.mark.parametrize(
    ("healed_counter", "kind"),
    [(CRASH + 2, None), (1, "counter_went_back"), (CRASH, "never_applied")],
    ids=["restored", "scheduler_restarted", "not_applied"],
)
def test_a_window_after_a_gap_judges_the_counters_as_the_whole_log(
    tmp_path: Path, healed_counter: int, kind: str | None
) -> None:
    _run(tmp_path / "run", healed_counter)
    whole = _ft011(verify(tmp_path / "run", select=["FT011"]))
    assert whole == ([] if kind is None else [(CRASH + 1, 1, kind)])
    for since in range(1, STEPS):
        windowed = verify(tmp_path / "run", select=["FT011"], since_step=since)
        assert _ft011(windowed) == _ft011(verify(tmp_path / "run", select=["FT011"]), since), since


@pytest.mark.parametrize("out", [1, LONG])
@pytest.mark.parametrize("healed_counter", [1, CRASH])
def test_a_follower_finds_a_counter_jump_across_a_gap_live(
    tmp_path: Path, healed_counter: int, out: int
) -> None:
    online = OnlineVerifier(tmp_path / "run", select=["FT011"])
    _run(tmp_path / "run", healed_counter, lambda: online.poll(), out)
    live = [(v.location.step, v.location.cell) for v in online.violations]
    assert live == [(CRASH + out, 1)], [v.message for v in online.violations]
    assert online.poll().finished
    assert _ft011(online.final) == _ft011(verify(tmp_path / "run", select=["FT011"]))
    assert [v.message for v in online.violations] == [
        v.message for r in online.final.results for v in r.violations
    ]


def test_a_follower_carries_no_reading_past_a_correct_long_heal(tmp_path: Path) -> None:
    """The correct twin: a cell back after :data:`LONG` steps with its counter restored
    from a peer (one more than the peer's before the step) is judged clean live."""
    online = OnlineVerifier(tmp_path / "run", select=["FT011"])
    _run(tmp_path / "run", CRASH + LONG + 1, lambda: online.poll(), LONG)
    assert online.judged_through >= CRASH + LONG
    assert online.violations == []
    assert online.poll().finished
    assert online.final.passed()
