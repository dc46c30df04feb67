"""The event log: typed events in crash-safe Parquet segments (imports no torch)."""

from ftaudit.eventlog.connect import connect
from ftaudit.eventlog.context import current, step_context
from ftaudit.eventlog.events import (
    AttemptEnd,
    CellOutcome,
    CellReconfigured,
    CheckpointRef,
    CheckpointSaved,
    ChecksumWhen,
    EngineWeightChecksum,
    Event,
    FaultInjected,
    FaultMode,
    Metric,
    Outcome,
    RunFinished,
    RunStarted,
    RunStatus,
    SampleAdvantageSummary,
    StepEnd,
    TrainerWeightChecksum,
    WitnessAllocated,
    WitnessCleared,
    WitnessSnapshot,
)
from ftaudit.eventlog.identity import Driver, Engine, Identity, RolloutManager, Trainer
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.reader import read_records, scan_run
from ftaudit.eventlog.record import Envelope, Record
from ftaudit.eventlog.registry import EventRegistry, default_registry, register_event
from ftaudit.eventlog.run import RunLog, find_checkpoint
from ftaudit.eventlog.writer import EventWriter, WriterOptions, WriterStats, flush_all

__all__ = [
    "AttemptEnd",
    "CellOutcome",
    "CellReconfigured",
    "CheckpointRef",
    "CheckpointSaved",
    "ChecksumWhen",
    "Driver",
    "Engine",
    "EngineWeightChecksum",
    "Envelope",
    "Event",
    "EventRegistry",
    "EventWriter",
    "FaultInjected",
    "FaultMode",
    "Identity",
    "IntRuns",
    "Metric",
    "Outcome",
    "Record",
    "RolloutManager",
    "RunFinished",
    "RunLog",
    "RunStarted",
    "RunStatus",
    "SampleAdvantageSummary",
    "StepEnd",
    "Trainer",
    "TrainerWeightChecksum",
    "WitnessAllocated",
    "WitnessCleared",
    "WitnessSnapshot",
    "WriterOptions",
    "WriterStats",
    "connect",
    "current",
    "default_registry",
    "find_checkpoint",
    "flush_all",
    "read_records",
    "register_event",
    "scan_run",
    "step_context",
]
