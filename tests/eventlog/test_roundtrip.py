"""Every event type survives Parquet and reads back the same, through Python and SQL."""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest

from ftaudit.eventlog import (
    AttemptEnd,
    CellOutcome,
    CellReconfigured,
    CheckpointRef,
    CheckpointSaved,
    ChecksumWhen,
    DataManifest,
    DataOrder,
    EngineWeightChecksum,
    Event,
    EventWriter,
    FaultInjected,
    FaultMode,
    IntRuns,
    LoaderState,
    LoaderWhen,
    Metric,
    ParameterManifest,
    RankOutcome,
    RunFinished,
    RunStarted,
    RunStatus,
    SampleAdvantageSummary,
    SampleFingerprints,
    StateAdopted,
    StepApplied,
    StepEnd,
    TrainerWeightChecksum,
    WitnessAllocated,
    WitnessGradient,
    WitnessSnapshot,
    connect,
    default_registry,
    read_records,
    step_context,
)
from ftaudit.eventlog.events import TorchftCommit, TorchftQuorum, WitnessCleared

ONE_OF_EACH: list[Event] = [
    RunStarted(
        resumed_from=CheckpointRef(iteration=4, incarnation=0),
        buffer_size=1 << 20,
        config_json='{"lr": 0.001}',
        dataset_size=10_000,
        deterministic_order=True,
    ),
    RunFinished(status=RunStatus.FAILED),
    WitnessAllocated(
        step=5,
        attempt=1,
        num_ids=5,
        counter_after=13,
        witness_ids=IntRuns.arc(8, 5, 10),
        sample_indices=IntRuns.from_sequence([40, 41, 42, 7, 8]),
        stale_ids=IntRuns.arc(3, 3, 10),
    ),
    WitnessSnapshot(
        step=5,
        attempt=1,
        cell=1,
        instance="chunk0.head",
        nonzero_ids=IntRuns.from_ids([0, 1, 2, 8, 9]),
        stale_ids=IntRuns(),
    ),
    SampleAdvantageSummary(
        step=5, attempt=1, cell=1, witness_ids=[8, 9], token_counts=[12, 0], all_zero=[True, False]
    ),
    StepEnd(
        step=5,
        attempt=1,
        accepted_attempt=1,
        cells={
            0: CellOutcome(ranks=[RankOutcome.NORMAL, RankOutcome.NORMAL]),
            3: CellOutcome(errored=True),
        },
    ),
    AttemptEnd(
        step=5,
        attempt=0,
        accepted=False,
        cells={1: CellOutcome(ranks=[RankOutcome.DISCARDED_SHOULD_RETRY])},
    ),
    CellReconfigured(step=6, quorum_id=3, heal_source=0, healed_cells=[1], alive_cells=[0, 1]),
    CheckpointSaved(iteration=6, path="/ckpt/6", writers={"w-a": 17, "w-b": -1}, complete=True),
    TrainerWeightChecksum(
        step=6,
        attempt=0,
        when=ChecksumWhen.AFTER_HEAL,
        cell=1,
        rank=0,
        hashes={"layer.weight": "ab12", "witness.head": "00ff"},
        heal_source=0,
    ),
    EngineWeightChecksum(step=None, engines={0: {"w": "aa"}, 1: {"w": "ab"}}),
    Metric(step=6, attempt=0, values={"loss": math.nan, "inf": math.inf, "neg": -math.inf}),
    FaultInjected(step=7, attempt=0, mode=FaultMode.HANG, target="cell1.rank0", cell=1, rank=0),
    SampleFingerprints(
        step=7,
        attempt=0,
        cell=1,
        sample_indices=IntRuns(starts=[8], lengths=[3]),
        fingerprints=[-(2**63), 0, 2**63 - 1],
        items=[12, 3, 7],
    ),
    WitnessCleared(step=7, attempt=1, cell=1, stale_ids=IntRuns(starts=[3], lengths=[2])),
    DataOrder(epoch=1, start=16, items=[3, 0, 2, 1], dataset_size=4, seed=7, shuffle=True),
    DataManifest(digest="ab" * 32, dataset_size=4, algorithm="blake2b-64/ftaudit-fp1"),
    LoaderState(iteration=7, when=LoaderWhen.SAVED, position=24, epoch=1, seed=7),
    StateAdopted(
        step=8,
        cell=1,
        rank=0,
        reason="kept live state",
        checkpoint=CheckpointRef(iteration=7, incarnation=0),
    ),
    WitnessGradient(
        step=9,
        attempt=0,
        cell=1,
        rank=0,
        instance="chunk0.head",
        nonzero_ids=IntRuns.from_ids([1, 2, 5]),
    ),
    StepApplied(step=9, attempt=0, cell=1, rank=0, counters={"optimizer": 10, "lr_scheduler": 10}),
    ParameterManifest(
        step=9,
        attempt=0,
        cell=1,
        rank=0,
        digest="d",
        names=["w", "b"],
        shapes=[[2, 3], []],
        dtypes=["bfloat16", "float32"],
        requires_grad=[True, False],
        groups=[0, -1],
        declared_change="freeze b",
    ),
    TorchftQuorum(step=3, quorum_id=2, torchft_step=3, replica_id="group1", group_rank=0),
    TorchftCommit(
        step=3, quorum_id=2, torchft_step=3, commit_result=False, replica_id="group1", group_rank=1
    ),
]


def test_one_of_each_builtin_type():
    assert {e.type for e in ONE_OF_EACH} == {t.name for t in default_registry}


def _same(a: Event, b: Event) -> bool:
    """Equality that treats NaN as equal to NaN."""
    if isinstance(a, Metric) and isinstance(b, Metric):
        return a.values.keys() == b.values.keys() and all(
            (math.isnan(x) and math.isnan(b.values[k])) or x == b.values[k]
            for k, x in a.values.items()
        )
    return a == b


def test_every_event_type_round_trips_through_parquet(writer: EventWriter, tmp_path: Path):
    seqs = [writer.log(e) for e in ONE_OF_EACH]
    assert seqs == list(range(len(ONE_OF_EACH)))
    writer.flush()
    records = read_records(tmp_path)
    assert [r.envelope.seq for r in records] == seqs
    for logged, record in zip(ONE_OF_EACH, records, strict=True):
        assert _same(logged, record.event), (logged, record.event)
        assert record.envelope.source_kind == "trainer"
        assert record.envelope.source_cell == 1
        assert record.envelope.run_id == "test-run"


def test_every_event_type_has_a_view_with_its_fields(writer: EventWriter, tmp_path: Path):
    for e in ONE_OF_EACH:
        writer.log(e)
    writer.flush()
    con = connect(tmp_path)
    for event_type in default_registry:
        rows = con.execute(f'SELECT * FROM "{event_type.name}"').fetchall()
        assert len(rows) == 1, event_type.name
        columns = [d[0] for d in con.execute(f'SELECT * FROM "{event_type.name}"').description]
        for name, _ in event_type.fields:
            assert name in columns


def test_nan_inf_and_int_keyed_maps_in_sql(writer: EventWriter, tmp_path: Path):
    for e in ONE_OF_EACH:
        writer.log(e)
    writer.flush()
    con = connect(tmp_path)
    values = dict(con.execute("SELECT name, value FROM metrics").fetchall())
    assert math.isnan(values["loss"]) and values["inf"] == math.inf and values["neg"] == -math.inf
    (errored,) = con.execute("SELECT cells[3].errored FROM step_end").fetchone()
    assert errored is True
    (hashes,) = con.execute("SELECT engines[1]['w'] FROM engine_weight_checksum").fetchone()
    assert hashes == "ab"
    (ids,) = con.execute("SELECT witness_ids.starts FROM witness_allocated").fetchone()
    assert ids == [8, 0]


def test_step_and_attempt_come_from_the_context(writer: EventWriter, tmp_path: Path):
    with step_context(3, attempt=2):
        writer.log(Metric(values={"a": 1.0}))
        writer.log(Metric(step=9, values={"b": 1.0}))  # the event's own step wins
    writer.log(Metric(values={"c": 1.0}))
    writer.flush()
    got = [(r.event.step, r.event.attempt) for r in read_records(tmp_path)]
    assert got == [(3, 2), (9, 2), (None, None)]


def test_interleaved_types_in_one_flush_keep_their_order_values_and_steps(
    writer: EventWriter, tmp_path: Path
):
    """One segment of interleaved types, logged with their own steps, inside contexts and
    outside: the flush groups rows by type, and every event reads back as logged, at its
    sequence number, with the step and attempt it had or inherited."""
    shared = IntRuns(starts=[5, 0], lengths=[3, 2])  # one object in several events
    logged: list[tuple[Event, tuple[int | None, int | None]]] = []

    def log(event: Event, step: int | None, attempt: int | None) -> None:
        assert writer.log(event) == len(logged)
        logged.append((event, (step, attempt)))

    for i in range(40):
        snapshot = WitnessSnapshot(
            cell=i % 3,
            instance=f"w{i % 2}",
            nonzero_ids=IntRuns(starts=[i], lengths=[i + 1]) if i % 4 else IntRuns(),
            stale_ids=shared,
        )
        with step_context(i, attempt=i % 2):
            log(snapshot, i, i % 2)
            log(Metric(attempt=7, values={f"m{i}": i / 3}), i, 7)
        log(Metric(values={}), None, None)
        log(WitnessCleared(step=100 + i, attempt=0, cell=0, stale_ids=shared), 100 + i, 0)
        log(CellReconfigured(quorum_id=i, heal_source=None if i % 2 else i), None, None)
    writer.flush()
    records = read_records(tmp_path)
    assert [r.envelope.seq for r in records] == list(range(len(logged)))
    for (event, steps), record in zip(logged, records, strict=True):
        step, attempt = steps
        assert record.event == event.model_copy(update={"step": step, "attempt": attempt})
        assert (record.envelope.step, record.envelope.attempt) == steps


@pytest.mark.parametrize(
    ("own", "context", "stored"),
    [
        ((None, None), None, None),
        ((1, None), None, None),
        ((None, 0), None, None),
        ((1, 0), None, (1, 0)),
        ((None, None), (3, 1), (3, 1)),
        ((1, None), (3, 1), (1, 1)),
        ((1, 0), (3, 1), (1, 0)),
    ],
)
def test_step_bound_event_needs_a_step_and_an_attempt_from_itself_or_its_context(
    writer: EventWriter,
    tmp_path: Path,
    own: tuple[int | None, int | None],
    context: tuple[int, int] | None,
    stored: tuple[int, int] | None,
):
    """Refused (None stored) unless the event or the step context gives each of the two;
    the event's own values win."""
    step, attempt = own
    event = WitnessSnapshot(
        step=step, attempt=attempt, cell=0, instance="x", nonzero_ids=IntRuns(), stale_ids=IntRuns()
    )
    with step_context(*context) if context else contextlib.nullcontext():
        if stored is None:
            with pytest.raises(ValueError, match="needs a step"):
                writer.log(event)
            return
        writer.log(event)
    writer.flush()
    (record,) = read_records(tmp_path)
    assert (record.envelope.step, record.envelope.attempt) == stored


def test_events_are_strict_and_frozen():
    with pytest.raises(ValueError):
        Metric(values={"a": "1.0"})  # type: ignore[dict-item]
    event = Metric(values={"a": 1.0})
    with pytest.raises(ValueError):
        event.values = {}  # type: ignore[misc]
