"""``EventWriter.log_fields``: the same events as ``log(model(...))``, stored the same way,
refused the same way, in the same sequence."""

from __future__ import annotations

import copy
import gc
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from ftaudit.errors import UsageError
from ftaudit.eventlog import (
    Event,
    EventWriter,
    IntRuns,
    Metric,
    StepApplied,
    Trainer,
    WitnessAllocated,
    WitnessGradient,
    WitnessSnapshot,
    WriterOptions,
    default_registry,
    hot,
    list_segments,
    read_records,
    step_context,
)
from ftaudit.eventlog.events import WitnessCleared
from ftaudit.eventlog.hot import KINDS
from tests.eventlog.test_roundtrip import ONE_OF_EACH


def _writer(run_dir: Path, **options: object) -> EventWriter:
    return EventWriter(
        run_dir,
        Trainer(cell_index=0, rank_within_cell=0),
        run_id="r",
        incarnation=0,
        options=WriterOptions(fsync=False, flush_interval_s=3600, **options),  # type: ignore[arg-type]
    )


def _values(event: Event) -> tuple:
    return tuple(vars(event)[name] for name, _ in default_registry[event.type].fields)


def _stored(run_dir: Path) -> bytes:
    """Every segment's rows, without the columns that differ between two writers, as
    Parquet bytes (``Table.equals`` holds NaN unequal to itself)."""
    tables = [pq.read_table(s.path) for s in list_segments(run_dir).files]
    table = pa.concat_tables(tables).drop_columns(["ts", "writer"]).combine_chunks()
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(None), sink)
    return sink.getvalue().to_pybytes()


def test_hot_types_are_checked_types():
    assert set(KINDS) == {
        WitnessSnapshot,
        WitnessGradient,
        WitnessCleared,
        WitnessAllocated,
        Metric,
        StepApplied,
    }


def test_every_type_is_stored_as_log_stores_it(tmp_path: Path):
    """Each event of every type, logged both ways into one flush and mixed (a type's rows
    from both paths merge in sequence order), gives the same segment as log() alone."""
    events = ONE_OF_EACH * 3
    with _writer(tmp_path / "objects") as writer:
        for event in events:
            writer.log(event)
    with _writer(tmp_path / "fields") as writer:
        for i, event in enumerate(events):
            if i % 2:
                writer.log(event)
            else:
                writer.log_fields(
                    type(event), *_values(event), step=event.step, attempt=event.attempt
                )
    assert _stored(tmp_path / "fields") == _stored(tmp_path / "objects")


def test_the_hooks_shared_values_are_stored_as_distinct_ones(tmp_path: Path):
    """As the hooks log a step: one stale set with every instance's snapshot, one step
    context for all of it (the flush converts each once); stored as log() stores
    distinct copies."""
    logged = []
    with _writer(tmp_path / "fields") as writer:
        for step in range(6):
            stale = IntRuns.arc(step, 2, 8)
            with step_context(step, step % 2):
                for cell, instance in ((0, "a"), (0, "b"), (1, "a"), (1, "b")):
                    nonzero = IntRuns.arc(cell + step, 3, 8) if step % 3 else IntRuns()
                    writer.log_fields(WitnessSnapshot, cell, instance, nonzero, stale)
                    logged.append((step, step % 2, cell, instance, nonzero, stale))
                writer.log_fields(Metric, {"loss": 1.0 / (step + 1)})
                logged.append((step, step % 2, {"loss": 1.0 / (step + 1)}))
    with _writer(tmp_path / "objects") as writer:
        for step, attempt, *values in logged:
            model = Metric if len(values) == 1 else WitnessSnapshot
            names = [
                name for name, _ in default_registry[model.model_fields["type"].default].fields
            ]
            copies = {
                n: copy.deepcopy(v) if isinstance(v, IntRuns) else v
                for n, v in zip(names, values, strict=True)
            }
            writer.log(model(step=step, attempt=attempt, **copies))
    assert _stored(tmp_path / "fields") == _stored(tmp_path / "objects")


MAPS = [
    {"loss": 1.0, "lr": 0.5},
    {"loss": 2.0, "lr": 0.25},  # the same names: one key sequence, converted once
    {"loss": 3.0, "lr": 0.125},
    {"lr": 1.0, "loss": 2.0},  # the same names in another order: another sequence
    {},
    {"loss": 4.0, "lr": 0.0625},
    {"grad_norm": float("nan"), "loss": float("inf")},
    {"grad_norm": -0.0, "loss": 5.0},
    {f"m{k}": float(k) for k in range(30)},  # keys built anew each time: equal, not the same
    {f"m{k}": float(k) for k in range(30)},
]


@pytest.mark.parametrize("bound", [4096, 2], ids=["table", "table_full"])
def test_maps_are_stored_as_log_stores_them_whatever_their_key_sequences(
    tmp_path: Path, bound: int
):
    """A metric's values and a step's counters are buffered as key and value tuples, a
    key sequence shared between the maps that repeat it (also when the table of known
    sequences is full); stored as log() stores the dicts."""
    table: dict[tuple[str, ...], tuple[str, ...]] = {}
    hot.use_key_sequences(table, bound)
    try:
        _log_maps_both_ways(tmp_path)
    finally:
        hot.use_key_sequences(hot.KEY_SEQUENCES, hot.MAX_KEY_SEQUENCES)
    assert _stored(tmp_path / "fields") == _stored(tmp_path / "objects")
    assert 0 < len(table) <= bound
    stored = [r.event.values for r in read_records(tmp_path / "fields") if r.event.type == "metric"]
    assert [list(v) for v in stored[: len(MAPS)]] == [list(v) for v in MAPS]  # order kept


def _log_maps_both_ways(tmp_path: Path) -> None:
    counters = [{"optimizer": step, "scheduler": 2 * step} for step in range(4)] + [{}]
    with _writer(tmp_path / "fields") as writer, step_context(3, 0):
        for _ in range(3):
            for values in MAPS:
                writer.log_fields(Metric, values)
            for i, values in enumerate(counters):
                writer.log_fields(StepApplied, i % 2, 0, values)
    with _writer(tmp_path / "objects") as writer, step_context(3, 0):
        for _ in range(3):
            for values in MAPS:
                writer.log(Metric(values=values))
            for i, values in enumerate(counters):
                writer.log(StepApplied(cell=i % 2, rank=0, counters=values))


def test_step_and_attempt_come_from_the_context_as_with_log(tmp_path: Path):
    runs = IntRuns.arc(0, 3, 8)
    with _writer(tmp_path) as writer, step_context(4, 1):
        writer.log_fields(WitnessSnapshot, 0, "w.head", runs, IntRuns())
        writer.log_fields(WitnessSnapshot, 0, "w.head", runs, IntRuns(), attempt=2)
        writer.log_fields(Metric, {"loss": 1.5}, step=9)
    records = read_records(tmp_path)
    assert [(r.envelope.step, r.envelope.attempt) for r in records] == [(4, 1), (4, 2), (9, 1)]
    assert records[0].event == WitnessSnapshot(
        step=4, attempt=1, cell=0, instance="w.head", nonzero_ids=runs, stale_ids=IntRuns()
    )


def test_steps_passed_in_turn_are_each_stored(tmp_path: Path):
    steps = [(1, 0), (1, 0), (2, 0), (1, 0), (1, 3), (None, None)]
    with _writer(tmp_path) as writer:
        for step, attempt in steps:
            writer.log_fields(Metric, {"a": 1.0}, step=step, attempt=attempt)
    stored = [(r.envelope.step, r.envelope.attempt) for r in read_records(tmp_path)]
    assert stored == steps


def test_a_step_bound_type_needs_a_step_and_a_metric_does_not(tmp_path: Path):
    with _writer(tmp_path) as writer:
        with pytest.raises(UsageError, match="witness_snapshot needs a step and an attempt"):
            writer.log_fields(WitnessSnapshot, 0, "w", IntRuns(), IntRuns())
        with pytest.raises(UsageError, match="needs a step and an attempt"):
            writer.log_fields(WitnessCleared, 0, IntRuns(), step=3)
        assert writer.log_fields(Metric, {"a": 1.0}) == 0
    (record,) = read_records(tmp_path)
    assert record.envelope.step is None


BAD = [
    (WitnessSnapshot, (-1, "w", IntRuns(), IntRuns()), "cell"),
    (WitnessSnapshot, (True, "w", IntRuns(), IntRuns()), "cell"),
    (WitnessSnapshot, (0, 3, IntRuns(), IntRuns()), "instance"),
    (WitnessSnapshot, (0, "w", [1, 2], IntRuns()), "nonzero_ids"),
    (WitnessGradient, (0, -2, "w", IntRuns()), "rank"),
    (WitnessCleared, (0, None), "stale_ids"),
    (Metric, ({"loss": "low"},), "values"),
    (Metric, ({1: 1.0},), "values"),
    (Metric, ({"ok": True},), "values"),
    (StepApplied, (0, 0, {"optimizer": 1.5}), "counters"),
    (WitnessAllocated, (2, 2, IntRuns.arc(0, 2, 8), IntRuns.arc(0, 3, 99), IntRuns()), "num_ids"),
]


@pytest.mark.parametrize(("model", "values", "field"), BAD, ids=lambda x: str(x)[:30])
def test_bad_values_are_refused_as_the_model_refuses_them(
    tmp_path: Path, model: type[Event], values: tuple, field: str
):
    names = [name for name, _ in default_registry[model.model_fields["type"].default].fields]
    with pytest.raises(ValidationError) as expected:
        model(step=1, attempt=0, **dict(zip(names, values, strict=True)))
    with _writer(tmp_path) as writer:
        with pytest.raises(ValidationError) as raised:
            writer.log_fields(model, *values, step=1, attempt=0)
        assert writer.log_fields(Metric, {"after": 0.0}) == 0  # nothing half-logged
    assert raised.value.errors(include_context=False) == expected.value.errors(
        include_context=False
    )
    assert field in str(raised.value)


def test_a_wrong_number_of_values_names_the_fields(tmp_path: Path):
    with _writer(tmp_path) as writer, step_context(0, 0):
        with pytest.raises(UsageError, match=r"takes 4 field values \(cell, instance, "):
            writer.log_fields(WitnessSnapshot, 0, "w", IntRuns())
        with pytest.raises(UsageError, match="takes 1 field values"):
            writer.log_fields(Metric, {"a": 1.0}, {"b": 2.0})


def test_values_the_model_converts_are_stored_converted(tmp_path: Path):
    with _writer(tmp_path) as writer:
        writer.log_fields(Metric, {"a": 1})  # an int for a float: the model makes it 1.0
    (record,) = read_records(tmp_path)
    assert record.event == Metric(values={"a": 1.0})
    assert isinstance(record.event.values["a"], float)


def test_a_dict_changed_after_logging_is_logged_as_it_was(tmp_path: Path):
    values = {"loss": 1.0}
    with _writer(tmp_path) as writer:
        writer.log_fields(Metric, values)
        values["loss"] = "changed"
        values["new"] = 2.0
    (record,) = read_records(tmp_path)
    assert record.event.values == {"loss": 1.0}


def test_an_unregistered_type_is_refused(tmp_path: Path):
    class Unregistered(Event):
        type: str = "unregistered_thing"

    with _writer(tmp_path) as writer, pytest.raises(UsageError, match="not registered"):
        writer.log_fields(Unregistered)


def test_a_failed_flush_keeps_both_kinds_of_rows_and_drops_the_oldest(tmp_path: Path):
    """Fail-open: beyond ``max_buffered`` the oldest events go, whichever way they were
    logged; the gap is counted and the rest lands in sequence once the disk works."""
    blocker = tmp_path / "events"
    blocker.write_text("not a directory")  # the writer cannot create events/<writer>/
    writer = _writer(tmp_path, flush_rows=10**6, max_buffered=5)
    for i in range(4):
        if i % 2:
            writer.log_fields(Metric, {"i": float(i)}, step=i, attempt=0)
        else:
            writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
    assert writer.flush() == -1
    for i in range(4, 8):
        if i % 2:
            writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
        else:
            writer.log_fields(Metric, {"i": float(i)}, step=i, attempt=0)
    assert writer.flush() == -1  # 8 buffered, 5 kept: seqs 0..2 dropped
    assert writer.stats.events_dropped == 3
    blocker.unlink()
    assert writer.flush() == 7
    writer.close()
    records = read_records(tmp_path)
    assert [r.envelope.seq for r in records] == [3, 4, 5, 6, 7]
    assert [r.event.values["i"] for r in records] == [3.0, 4.0, 5.0, 6.0, 7.0]


def test_buffered_rows_give_the_garbage_collector_nothing_to_track(tmp_path: Path):
    """A buffered row holds no container of its own: rows kept until the flush would be
    promoted to the collector's oldest generation and set off full passes over the
    training process's heap, on the training thread."""
    nonzero, stale = IntRuns.arc(0, 3, 8), IntRuns.arc(4, 2, 8)
    with _writer(tmp_path, flush_rows=10**6) as writer, step_context(0, 0):
        writer.log_fields(WitnessSnapshot, 0, "w", nonzero, stale)  # the types' first rows
        writer.log_fields(Metric, {"loss": 0.5, "lr": 0.1})  # a map: key and value tuples
        gc.collect()
        tracked = len(gc.get_objects())
        for step in range(1000):
            writer.log_fields(WitnessSnapshot, 0, "w", nonzero, stale)
            writer.log_fields(Metric, {"loss": 1.0 / (step + 1), "lr": 0.1})
        gc.collect()
        assert len(gc.get_objects()) - tracked < 100
    assert len(read_records(tmp_path)) == 2002
