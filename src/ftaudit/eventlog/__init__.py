"""The event log: typed events in crash-safe Parquet segments (imports no torch).

``connect`` is loaded on first use: a process that only writes events never imports DuckDB.
"""

from typing import TYPE_CHECKING, Any

from ftaudit.eventlog.context import current, step_context
from ftaudit.eventlog.events import (
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
    FaultInjected,
    FaultMode,
    LoaderState,
    LoaderWhen,
    Metric,
    Outcome,
    ParameterManifest,
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
    WitnessCleared,
    WitnessGradient,
    WitnessSnapshot,
    WriterHead,
)
from ftaudit.eventlog.identity import Driver, Engine, Identity, RolloutManager, Trainer
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.reader import RunScan, SegmentInfo, check_segment, read_records, scan_run
from ftaudit.eventlog.record import Envelope, Record
from ftaudit.eventlog.registry import EventRegistry, default_registry, register_event
from ftaudit.eventlog.resume import CompleteCheckpoint, ResumeIndex
from ftaudit.eventlog.run import RunLog, complete_checkpoints, find_checkpoint, latest_checkpoint
from ftaudit.eventlog.rundir import SegmentFile, SegmentListing, is_run, list_segments
from ftaudit.eventlog.writer import EventWriter, WriterOptions, WriterStats, flush_all

if TYPE_CHECKING:
    from ftaudit.eventlog.connect import connect

__all__ = [
    "AttemptEnd",
    "CellOutcome",
    "CellReconfigured",
    "CheckpointRef",
    "CheckpointSaved",
    "ChecksumWhen",
    "CompleteCheckpoint",
    "DataManifest",
    "DataOrder",
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
    "LoaderState",
    "LoaderWhen",
    "Metric",
    "Outcome",
    "ParameterManifest",
    "Record",
    "ResumeIndex",
    "RolloutManager",
    "RunFinished",
    "RunLog",
    "RunScan",
    "RunStarted",
    "RunStatus",
    "SampleAdvantageSummary",
    "SampleFingerprints",
    "SegmentFile",
    "SegmentInfo",
    "SegmentListing",
    "StateAdopted",
    "StepApplied",
    "StepEnd",
    "Trainer",
    "TrainerWeightChecksum",
    "WitnessAllocated",
    "WitnessCleared",
    "WitnessGradient",
    "WitnessSnapshot",
    "WriterHead",
    "WriterOptions",
    "WriterStats",
    "check_segment",
    "complete_checkpoints",
    "connect",
    "current",
    "default_registry",
    "find_checkpoint",
    "flush_all",
    "is_run",
    "latest_checkpoint",
    "list_segments",
    "read_records",
    "register_event",
    "scan_run",
    "step_context",
]


def __getattr__(name: str) -> Any:
    if name == "connect":
        from ftaudit.eventlog.connect import connect

        # importing the submodule bound its name to the module: bind the function instead
        globals()["connect"] = connect
        return connect
    raise AttributeError(f"module 'ftaudit.eventlog' has no attribute {name!r}")
