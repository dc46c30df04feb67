"""FT005's holes in an incremental verification: looked for above where the committed
stream stood before the judged steps, not above the lowest loaded sample. A step whose
loader jumped back to samples trained long before (below every loaded step) made the
stream between look unread: ``--since-step`` and a follower reported a hole the full
verification does not have."""

from __future__ import annotations

from pathlib import Path

from ftaudit.verifier import verify
from tests.support.builder import RunBuilder


def _jumps_back(root: Path) -> Path:
    """Steps 0-19 train samples 3s..3s+2; at step 20 the loader jumps back to sample 0
    and goes on from there."""
    b = RunBuilder(root)
    run = b.start(deterministic_order=True)
    for step in range(20):
        run.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        run.flush()  # a segment a step: a window loads the recent ones only
    for k, step in enumerate(range(20, 23)):
        run.train(step, [3 * k, 3 * k + 1, 3 * k + 2])
        run.flush()
    run.finish()
    return root


def _ft005(run: Path, since: int | None = None) -> list[tuple[str, int | None]]:
    (result,) = verify(run, select=["FT005"], since_step=since).results
    return sorted((v.kind, v.location.step) for v in result.violations)


def test_a_jump_back_is_no_hole_from_since_step_on(tmp_path: Path) -> None:
    run = _jumps_back(tmp_path / "run")
    full = _ft005(run)
    assert full == [("duplicate_sample", 0), ("duplicate_sample", 1), ("duplicate_sample", 2)]
    for since in (20, 21, 22):
        assert not [f for f in _ft005(run, since) if f[0] == "skipped_sample"], since
    # a real hole in the judged steps is still found
    b = RunBuilder(tmp_path / "hole")
    inc = b.start(deterministic_order=True)
    for step in range(20):
        inc.train(step, [3 * step, 3 * step + 1, 3 * step + 2])
        inc.flush()
    inc.train(20, [63, 64, 65])  # samples 60-62 skipped
    inc.finish()
    assert ("skipped_sample", None) in _ft005(tmp_path / "hole", 20)
    assert ("skipped_sample", None) in _ft005(tmp_path / "hole")
