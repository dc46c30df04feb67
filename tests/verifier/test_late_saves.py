"""A checkpoint saved after its step was judged live: the follower judges the save when it
lands.

An asynchronous save of step ``c`` (torch DCP's ``async_save``, the demo's
``checkpoint_one_step_late``) seals its ``at_save`` checksums and its loader state after
the follower has judged step ``c``: its findings are about step ``c``, before the window.
Before the follower took a segment new to its poll as late evidence, only the final
verification judged such a save, so a wrong checkpoint passed every live gate until the
run ended.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ftaudit.eventlog import CheckpointRef, ChecksumWhen
from ftaudit.verifier import verify
from ftaudit.verifier.online import OnlineVerifier, Poll
from tests.support.builder import RunBuilder

SAVED = 2
LANDS_AFTER = 3
"""The save of step :data:`SAVED` lands once this step was sealed and judged."""


def _run(root: Path, stale: bool, online: OnlineVerifier) -> tuple[list[Poll], int]:
    """Six steps; checkpoint :data:`SAVED` is sealed after step :data:`LANDS_AFTER` was,
    with (``stale``) the weights and loader position of step :data:`LANDS_AFTER`. The
    polls after each flush, and the index of the first one after the save."""
    polls = []
    landed = -1
    b = RunBuilder(root, B=64, cells=1)
    run = b.start(deterministic_order=True, dataset_size=1000)
    for step in range(6):
        run.train(step, [3 * step + i for i in range(3)])
        run.checksum(step, 0, {"w": f"w{step}"})
        run.flush()
        polls.append(online.poll())
        if step == LANDS_AFTER:
            state = LANDS_AFTER if stale else SAVED
            ref = CheckpointRef(iteration=SAVED, incarnation=0)
            run.checksum(step, 0, {"w": f"w{state}"}, when=ChecksumWhen.AT_SAVE, checkpoint=ref)
            run.loader(SAVED, "saved", 3 * (state + 1))
            run.checkpoint(SAVED)
            run.flush()
            landed = len(polls)
            polls.append(online.poll())
    run.finish()
    b.close()
    return polls, landed


@pytest.mark.parametrize("stale", [False, True])
def test_a_save_that_lands_after_its_step_was_judged_is_judged_live(
    tmp_path: Path, stale: bool
) -> None:
    online = OnlineVerifier(tmp_path / "run", select=["FT008", "FT010"])
    polls, landed = _run(tmp_path / "run", stale, online)
    before = polls[:landed]  # the polls before the save was sealed
    assert any(p.judged and p.judged[0] <= SAVED <= p.judged[1] for p in before)
    assert not [v for p in before for v in p.violations]
    live = sorted((v.code, v.kind, v.location.step) for v in online.violations)
    expected = (
        [("FT008", "loader_state_wrong", SAVED), ("FT010", "checkpoint_not_its_step", SAVED)]
        if stale
        else []
    )
    assert live == expected, [v.message for v in online.violations]
    assert online.poll().finished
    offline = verify(tmp_path / "run", select=["FT008", "FT010"])
    assert (
        sorted((v.code, v.kind, v.location.step) for r in offline.results for v in r.violations)
        == expected
    )
