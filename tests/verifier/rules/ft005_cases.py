"""FT005 sample-exactly-once: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from functools import partial

from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Build, Case, Expect
from tests.verifier.rules.recipes import restart_ok, threes

RULE = "FT005"


def sample_twice(b: RunBuilder) -> None:
    run = b.start()
    run.train(0, [0, 1, 2, 3])
    run.train(1, [3, 4, 5])
    run.finish()


def sample_skipped(b: RunBuilder, order: bool | None = True) -> None:
    run = b.start(deterministic_order=order)
    run.train(0, [0, 1, 2])
    run.train(1, [4, 5, 6])
    run.finish()


def no_samples_at_all(b: RunBuilder) -> None:
    """Every committed step's allocation is empty (e.g. all rollouts filtered): once a crash
    in FT005 (no highest committed index to look below)."""
    run = b.start(deterministic_order=True)
    run.train(0, [])
    run.train(1, [])
    run.finish()


def _replay(b: RunBuilder, order: bool | None) -> None:
    run = b.start(deterministic_order=order)
    for step in range(3):
        run.train(step, threes(step))
        if step == 0:
            run.checkpoint(0)
    run.log.close()
    again = b.start(resume_from=0, deterministic_order=order)
    again.train(1, [3, 4, 5])
    again.train(2, [9, 10, 11])
    again.finish()


def loader_restart(offset: int) -> Build:
    """Resumed from checkpoint 3 with the loader at stream position ``offset``."""

    def build(b: RunBuilder) -> None:
        run = b.start(deterministic_order=True)
        for step in range(6):
            run.train(step, range(4 * step, 4 * step + 4))
            if step == 3:
                run.checkpoint(3)
        run.log.close()
        again = b.start(resume_from=3, deterministic_order=True)
        for k, step in enumerate(range(4, 8)):
            again.train(step, range(offset + 4 * k, offset + 4 * k + 4))
        again.finish()

    return build


CASES: tuple[Case, ...] = (
    Case("a restart trains each sample once", restart_ok),
    Case("committed steps that hold no samples at all", no_samples_at_all),
    Case(
        "a sample index trained in two committed steps",
        sample_twice,
        (Expect(samples=(3,), text="steps 0, 1"),),
    ),
    Case(
        "a skipped sample in a deterministic order",
        sample_skipped,
        (Expect(samples=(3,), text="never trained"),),
    ),
    # a hole or a changed replay is an error only under a declared deterministic order:
    # declared non-deterministic (False) and undeclared (None) read the same (FT008 too)
    Case(
        "a skipped sample, order declared non-deterministic",
        partial(sample_skipped, order=False),
        (Expect(samples=(3,), severity="warning", text="does not declare a deterministic"),),
    ),
    Case(
        "a skipped sample, order undeclared",
        partial(sample_skipped, order=None),
        (Expect(samples=(3,), severity="warning", text="does not declare a deterministic"),),
    ),
    Case(
        "a replayed step training other samples, order undeclared",
        partial(_replay, order=None),
        (
            Expect(step=2, severity="warning", text="does not declare a deterministic"),
            Expect(samples=(6, 7, 8), severity="warning", kind="skipped_sample"),
        ),
    ),
    Case(
        "a replayed step training other samples",
        partial(_replay, order=True),
        (
            Expect(step=2, samples=(9, 10, 11, 6, 7, 8), text="replayed"),
            Expect(samples=(6, 7, 8), kind="skipped_sample", text="declares a deterministic"),
        ),
    ),
    Case(
        "a replayed step training other samples, order declared non-deterministic",
        partial(_replay, order=False),
        (
            Expect(step=2, severity="warning", text="does not declare a deterministic"),
            Expect(samples=(6, 7, 8), severity="warning", kind="skipped_sample"),
        ),
    ),
    Case(
        "a loader restarting at 0 after a resume is one finding",
        loader_restart(0),
        (
            Expect(
                step=4,
                kind="resumed_stream_replays",
                text="starts at sample 0, not at 16",
                samples=tuple(range(16)),
            ),
        ),
        B=40,
    ),
    Case(
        "a loader resuming one group late is one finding",
        loader_restart(18),
        (Expect(step=4, kind="resumed_stream_skips", text="skips samples [16..17]"),),
        B=40,
    ),
)
