"""The writer's hot path in C (``ftaudit.eventlog.hotpath``) against the rules it keeps,
written here in Python: ``add`` accepts exactly what the event's model would keep
unchanged and stores it as documented in :mod:`ftaudit.eventlog.hot`; ``runs_buffers``
lays id runs out as Arrow's own converter does.

Declining more than the rules would only cost speed (the model's path stores the same
event); accepting more would store what the model refuses, so the property tests draw
values on both sides of every rule."""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ftaudit.eventlog import IntRuns, Metric, StepApplied
from ftaudit.eventlog.arrow_schema import arrow_type, to_arrow
from ftaudit.eventlog.context import StepAttempt
from ftaudit.eventlog.events import (
    WitnessAllocated,
    WitnessCleared,
    WitnessGradient,
    WitnessSnapshot,
)
from ftaudit.eventlog.hot import KEY_SEQUENCES, KINDS, add, use_key_sequences
from ftaudit.eventlog.hotpath import runs_buffers


def _natural(v: Any) -> bool:
    return type(v) is int and v >= 0


def _runs(v: Any) -> bool:
    return type(v) is IntRuns


def _map(v: Any, kind: type) -> tuple[tuple, tuple] | None:
    if type(v) is not dict or not all(type(k) is str for k in v):
        return None
    if not all(type(x) is kind for x in v.values()):
        return None
    return tuple(v), tuple(v.values())


def reference(model: type, values: tuple) -> tuple | None:
    """What a row of ``model`` stores for ``values`` by the rules, or None (declined)."""
    n = len(values)
    if model is WitnessSnapshot:
        ok = n == 4 and _natural(values[0]) and type(values[1]) is str
        return values if ok and _runs(values[2]) and _runs(values[3]) else None
    if model is WitnessGradient:
        ok = n == 4 and _natural(values[0]) and _natural(values[1])
        return values if ok and type(values[2]) is str and _runs(values[3]) else None
    if model is WitnessCleared:
        return values if n == 2 and _natural(values[0]) and _runs(values[1]) else None
    if model is WitnessAllocated:
        if not (n == 5 and _natural(values[0]) and _natural(values[1])):
            return None
        if not all(map(_runs, values[2:])):
            return None
        aligned = sum(values[2].lengths) == values[0] == sum(values[3].lengths)
        return values if aligned else None
    if model is Metric:
        pair = _map(values[0], float) if n == 1 else None
        return pair
    if model is StepApplied:
        if not (n == 3 and _natural(values[0]) and _natural(values[1])):
            return None
        pair = _map(values[2], int)
        return None if pair is None else (values[0], values[1], *pair)
    raise AssertionError(model)


def _added(model: type, values: tuple) -> tuple | None:
    out: list[Any] = ["before"]
    context = StepAttempt(1, 0)
    if not add(KINDS[model], values, out, 7, 99, context):
        assert out == ["before"]  # nothing half-appended
        return None
    assert out[0] == "before" and out[-3:] == [7, 99, context]
    return tuple(out[1:-3])


def mostly(valid: st.SearchStrategy, invalid: st.SearchStrategy) -> st.SearchStrategy:
    """``valid`` three times in four: a row is accepted often enough that both sides of
    every rule are drawn."""
    return st.one_of(valid, valid, valid, invalid)


runs = st.builds(
    IntRuns.arc, st.integers(0, 50), st.integers(0, 20), st.sampled_from([8, 64, 1 << 40])
)
cells = mostly(
    st.integers(0, 2**70),
    st.one_of(st.integers(-(2**70), -1), st.booleans(), st.floats(allow_nan=False), st.none()),
)
run_sets = mostly(
    runs,
    st.one_of(st.just([1, 2]), st.none(), st.just({"starts": [], "lengths": []})),
)
names = mostly(st.text(max_size=5), st.one_of(st.integers(0, 3), st.none()))
keys = mostly(st.text(max_size=4), st.integers(0, 3))
floats = mostly(st.floats(), st.one_of(st.integers(-2, 2), st.booleans(), st.text(max_size=2)))
counts = mostly(st.integers(-(2**70), 2**70), st.one_of(st.booleans(), st.floats(allow_nan=False)))
maps_of = {
    float: mostly(st.dictionaries(keys, floats, max_size=4), st.none()),
    int: mostly(st.dictionaries(keys, counts, max_size=4), st.lists(st.integers(), max_size=2)),
}


def _values(model: type) -> st.SearchStrategy[tuple]:
    if model is WitnessSnapshot:
        return st.tuples(cells, names, run_sets, run_sets)
    if model is WitnessGradient:
        return st.tuples(cells, cells, names, run_sets)
    if model is WitnessCleared:
        return st.tuples(cells, run_sets)
    if model is WitnessAllocated:  # aligned three times in four, then misaligned
        return st.integers(0, 20).flatmap(
            lambda n: st.tuples(
                mostly(st.just(n), st.one_of(st.integers(0, 25), cells)),
                cells,
                mostly(st.just(IntRuns.arc(3, n, 64)), run_sets),
                mostly(st.just(IntRuns.arc(0, n, 1 << 40)), run_sets),
                run_sets,
            )
        )
    if model is Metric:
        return st.tuples(maps_of[float])
    return st.tuples(cells, cells, maps_of[int])


@pytest.mark.parametrize("model", list(KINDS), ids=lambda m: m.__name__)
@given(data=st.data())
def test_add_accepts_exactly_what_the_rules_accept(model: type, data: st.DataObject) -> None:
    values = data.draw(_values(model))
    assert _added(model, values) == reference(model, values)


@pytest.mark.parametrize("model", list(KINDS), ids=lambda m: m.__name__)
def test_a_wrong_number_of_values_is_declined(model: type) -> None:
    assert _added(model, ()) is None
    assert _added(model, (0,) * 7) is None


def test_a_map_shares_its_key_sequence_and_copies_its_values() -> None:
    table: dict[tuple[str, ...], tuple[str, ...]] = {}
    use_key_sequences(table, 1)
    try:
        first = _added(Metric, ({"a": 1.0, "b": 2.0},))
        again = _added(Metric, ({"a": 3.0, "b": 4.0},))
        other = _added(Metric, ({"c": 1.0},))  # the table is full: checked, not kept
    finally:
        use_key_sequences(KEY_SEQUENCES, 4096)
    assert first is not None and again is not None and other is not None
    assert first[0] is again[0] and list(table) == [("a", "b")]
    assert again[1] == (3.0, 4.0) and other == (("c",), (1.0,))


def test_a_float_that_is_an_int_subclass_or_a_dict_subclass_is_declined() -> None:
    class Counters(dict):
        pass

    class Count(int):
        pass

    assert _added(StepApplied, (0, 0, Counters(a=1))) is None
    assert _added(StepApplied, (Count(0), 0, {"a": 1})) is None
    assert _added(WitnessCleared, (0, type("Runs", (IntRuns,), {})())) is None


def test_unknown_kinds_and_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="no hot event kind 9"):
        add(9, (), [], 0, 0, None)
    with pytest.raises(TypeError, match="add"):
        add(0, [], [], 0, 0, None)


@pytest.mark.parametrize(
    ("model", "values"),
    [(Metric, ({"loss": 1.0},)), (StepApplied, (0, 0, {"optimizer": 3}))],
    ids=["metric", "step_applied"],
)
def test_no_collection_runs_inside_add(model: type, values: tuple) -> None:
    """The writer calls ``add`` holding its buffer lock. A collection set off there by a
    map's two new tuples could run a finalizer that logs to the same writer, which would
    wait on that lock forever; the collection waits for the next allocation instead."""
    seen = [_collections_around_add(model, values) for _ in range(ATTEMPTS)]
    assert all(during == 0 for during, _ in seen), seen
    # another thread's collection still running its finalizers (a writer or a DuckDB
    # connection of an earlier test, closing) sets none off: the suite saw that once in a
    # while, never alone. A collection that waited and never ran would miss every time.
    assert any(after > 0 for _, after in seen), seen


ATTEMPTS = 5


def _collections_around_add(model: type, values: tuple) -> tuple[int, int]:
    """How many collections ran inside ``add``, and by the allocation right after it."""
    # a key sequence no earlier test in this process logged: its tuple is new (one seen
    # before is shared, nothing is allocated, and no collection was pending)
    fresh = f"_{uuid.uuid4().hex}"
    values = tuple(
        {k + fresh: v for k, v in x.items()} if isinstance(x, dict) else x for x in values
    )
    out: list[Any] = []
    context = StepAttempt(0, 0)
    collections: list[str] = []

    def seen(phase: str, info: dict) -> None:
        collections.append(phase)

    enabled = gc.isenabled()  # an earlier test's library may have left it off
    gc.enable()
    gc.collect()
    gc.callbacks.append(seen)
    thresholds = gc.get_threshold()
    gc.set_threshold(1)  # any new tracked object sets off a collection
    try:
        added = add(KINDS[model], values, out, 0, 0, context)
        during = len(collections)
        [object()]  # a new list: the collection that waited runs now
        after = len(collections)
        left_enabled = gc.isenabled()
    finally:
        gc.set_threshold(*thresholds)
        gc.callbacks.remove(seen)
        if not enabled:
            gc.disable()
    assert added and out[-3:] == [0, 0, context]
    assert left_enabled, "add left the collector disabled"
    return during, after


run_lists = st.lists(
    st.one_of(
        runs,
        st.builds(
            lambda s, n: IntRuns(starts=s, lengths=n),
            st.lists(st.integers(-(2**63), 2**63 - 1), min_size=2, max_size=2),
            st.lists(st.integers(1, 2**63 - 1), min_size=2, max_size=2),
        ),
    ),
    max_size=30,
)


@given(values=run_lists)
def test_runs_are_laid_out_as_arrow_converts_them(values: list[IntRuns]) -> None:
    typ = arrow_type(IntRuns)
    expected = pa.array([{"starts": r.starts, "lengths": r.lengths} for r in values], typ)
    converted = to_arrow(values, IntRuns)
    converted.validate(full=True)
    assert converted.equals(expected)
    assert runs_buffers(values) is not None


@pytest.mark.parametrize(
    "values",
    [
        [IntRuns.arc(0, 3, 8), None],
        [IntRuns(starts=[2**63], lengths=[1])],
        [{"starts": [1], "lengths": [1]}],
    ],
    ids=["null", "beyond_int64", "not_runs"],
)
def test_runs_the_buffers_cannot_hold_are_left_to_arrow(values: list) -> None:
    assert runs_buffers(values) is None
