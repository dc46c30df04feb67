"""FT007 engine-checksums: its cases as data (pass and fail), run by ``test_rule_cases.py``."""

from __future__ import annotations

from tests.support.builder import RunBuilder
from tests.verifier.rules.case import Case, Expect

RULE = "FT007"


def engines_equal(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a"}, 1: {"w": "a"}})
    run.engines(0, {0: {"w": "b"}, 1: {"w": "b"}, 2: {"w": "b"}})
    run.finish()


def engine_differs(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a"}, 1: {"w": "a"}})
    run.engines(0, {0: {"w": "b"}, 1: {"w": "b"}, 2: {"w": "c"}})
    run.finish()


def engine_tensor_missing(b: RunBuilder) -> None:
    run = b.start()
    run.engines(None, {0: {"w": "a", "v": "x"}, 1: {"w": "a"}})
    run.finish()


CASES: tuple[Case, ...] = (
    Case("engines agree", engines_equal),
    Case(
        "an engine differing from engine 0",
        engine_differs,
        (Expect(step=0, text="engine 2 differs"),),
    ),
    Case(
        "a tensor present on one engine only",
        engine_tensor_missing,
        (Expect(text="missing on engine 1 [v]"),),
    ),
)
