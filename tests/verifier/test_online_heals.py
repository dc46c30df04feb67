"""FT006 live: a heal is placed in its step as the whole log will place it, whatever part
of the healed rank's next step the window has loaded.

A cell healed after step s trains step s+1 next. A live window may hold that rank's
first events of step s+1 (a snapshot, sealed in one flush) but not yet its after-step
checksum (sealed in the next): the heal must not read as "before step s" there, or it is
compared with what the source held before the step and reported, then cleared by the
final verification (a provisional false alarm). The run is fed to the online verifier
segment by segment, a poll after each flush of every writer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ftaudit.eventlog import ChecksumWhen
from ftaudit.verifier.online import OnlineVerifier
from tests.support.builder import ERRORED, NORMAL, RunBuilder

AFTER_HEAL = ChecksumWhen.AFTER_HEAL


def _heal_after_the_step(root: Path, received: str, poll: Callable[[], None]) -> None:
    """Cell 1 is healed from cell 0 before step 1 trains; cell 2 dies in step 1 and is
    healed from cell 1 after it (sent: cell 1's state after step 1, ``w1``); the
    snapshots of step 2 are sealed one flush before its after-step checksums."""
    b = RunBuilder(root, B=40, cells=3)
    run = b.start()
    run.train(0, [0, 1, 2])
    for cell in range(3):
        run.checksum(0, cell, {"w": "w0"})
    run.flush()
    poll()
    run.checksum(1, 1, {"w": "w0"}, when=AFTER_HEAL, source_cell=0)
    run.train(1, [3, 4, 5], cells={0: NORMAL, 1: NORMAL, 2: ERRORED})
    for cell in (0, 1):
        run.checksum(1, cell, {"w": "w1"})
    run.checksum(1, 2, {"w": received}, when=AFTER_HEAL, source_cell=1)
    run.flush()
    poll()
    run.train(2, [6, 7, 8])
    run.flush()
    poll()  # step 1 settles: cell 2's step 2 is on disk in part (no after-step checksum)
    for step, samples in ((2, ()), (3, (9, 10, 11))):
        if samples:
            run.train(step, list(samples))
        for cell in range(3):
            run.checksum(step, cell, {"w": f"w{step}"})
        run.flush()
        poll()
    run.finish()
    b.close()


def _follow(root: Path, received: str) -> tuple[OnlineVerifier, list[tuple[int, int] | None]]:
    online = OnlineVerifier(root, select=["FT006"])
    judged: list[tuple[int, int] | None] = []

    def poll() -> None:
        judged.append(online.poll().judged)

    _heal_after_the_step(root, received, poll)
    assert online.poll().finished
    return online, judged


def test_a_heal_after_the_step_gives_no_provisional_alarm(tmp_path: Path) -> None:
    online, judged = _follow(tmp_path / "run", received="w1")
    # step 1 was judged at the third poll, before cell 2's after-step checksum of step 2
    assert judged[2] is not None and judged[2][1] >= 1, judged
    assert online.violations == [], [v.message for v in online.violations]
    assert online.final is not None and online.final.passed()


def test_a_heal_that_received_the_state_before_the_step_is_found_live(tmp_path: Path) -> None:
    online, _ = _follow(tmp_path / "run", received="w0")
    live = [v for v in online.violations if v.kind == "heal_mismatch"]
    assert [(v.location.step, v.location.cell) for v in live] == [(1, 2)], live
    assert "healed from cell 1" in live[0].message
    assert online.final is not None and not online.final.passed()
