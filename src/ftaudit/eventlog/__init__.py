"""The event log: typed events in crash-safe Parquet segments (imports no torch).

The package's names load on first use (PEP 562): a process that only writes events never
imports DuckDB, and a verifier that only reads segments never imports the writer, the
run-directory writer side or the resume index.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ftaudit.eventlog.connect import (
        connect,
    )
    from ftaudit.eventlog.context import (
        current,
        step_context,
    )
    from ftaudit.eventlog.events import (
        AttemptEnd,
        CellOutcome,
        CellReconfigured,
        CheckpointRef,
        CheckpointSaved,
        DataManifest,
        DataOrder,
        EngineWeightChecksum,
        Event,
        FaultInjected,
        LoaderState,
        Metric,
        ParameterManifest,
        RunFinished,
        RunStarted,
        SampleAdvantageSummary,
        SampleFingerprints,
        StateAdopted,
        StepApplied,
        StepEnd,
        TorchftCommit,
        TorchftQuorum,
        TrainerWeightChecksum,
        WitnessAllocated,
        WitnessCleared,
        WitnessGradient,
        WitnessSnapshot,
        WriterHead,
    )
    from ftaudit.eventlog.identity import (
        Driver,
        Engine,
        Identity,
        RolloutManager,
        Trainer,
    )
    from ftaudit.eventlog.intruns import (
        IntRuns,
    )
    from ftaudit.eventlog.reader import (
        RunScan,
        SegmentInfo,
        check_segment,
        read_records,
        scan_run,
    )
    from ftaudit.eventlog.record import (
        Envelope,
        Record,
    )
    from ftaudit.eventlog.registry import (
        EventRegistry,
        default_registry,
        register_event,
    )
    from ftaudit.eventlog.resume import (
        CompleteCheckpoint,
        ResumeIndex,
    )
    from ftaudit.eventlog.run import (
        RunLog,
        complete_checkpoints,
        find_checkpoint,
        latest_checkpoint,
    )
    from ftaudit.eventlog.rundir import (
        SegmentFile,
        SegmentListing,
        is_run,
        list_segments,
    )
    from ftaudit.eventlog.vocabulary import (
        ChecksumWhen,
        FaultMode,
        LoaderWhen,
        RankOutcome,
        RunStatus,
    )
    from ftaudit.eventlog.writer import (
        EventWriter,
        WriterOptions,
        WriterStats,
        flush_all,
    )

_HOME: dict[str, str] = {
    "AttemptEnd": "events",
    "CellOutcome": "events",
    "CellReconfigured": "events",
    "CheckpointRef": "events",
    "CheckpointSaved": "events",
    "ChecksumWhen": "vocabulary",
    "CompleteCheckpoint": "resume",
    "DataManifest": "events",
    "DataOrder": "events",
    "Driver": "identity",
    "Engine": "identity",
    "EngineWeightChecksum": "events",
    "Envelope": "record",
    "Event": "events",
    "EventRegistry": "registry",
    "EventWriter": "writer",
    "FaultInjected": "events",
    "FaultMode": "vocabulary",
    "Identity": "identity",
    "IntRuns": "intruns",
    "LoaderState": "events",
    "LoaderWhen": "vocabulary",
    "Metric": "events",
    "RankOutcome": "vocabulary",
    "ParameterManifest": "events",
    "Record": "record",
    "ResumeIndex": "resume",
    "RolloutManager": "identity",
    "RunFinished": "events",
    "RunLog": "run",
    "RunScan": "reader",
    "RunStarted": "events",
    "RunStatus": "vocabulary",
    "SampleAdvantageSummary": "events",
    "SampleFingerprints": "events",
    "SegmentFile": "rundir",
    "SegmentInfo": "reader",
    "SegmentListing": "rundir",
    "StateAdopted": "events",
    "StepApplied": "events",
    "StepEnd": "events",
    "TorchftCommit": "events",
    "TorchftQuorum": "events",
    "Trainer": "identity",
    "TrainerWeightChecksum": "events",
    "WitnessAllocated": "events",
    "WitnessCleared": "events",
    "WitnessGradient": "events",
    "WitnessSnapshot": "events",
    "WriterHead": "events",
    "WriterOptions": "writer",
    "WriterStats": "writer",
    "check_segment": "reader",
    "complete_checkpoints": "run",
    "connect": "connect",
    "current": "context",
    "default_registry": "registry",
    "find_checkpoint": "run",
    "flush_all": "writer",
    "is_run": "rundir",
    "latest_checkpoint": "run",
    "list_segments": "rundir",
    "read_records": "reader",
    "register_event": "registry",
    "scan_run": "reader",
    "step_context": "context",
}
"""Where each public name lives (its submodule of ``ftaudit.eventlog``)."""

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
    "ParameterManifest",
    "RankOutcome",
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
    "TorchftCommit",
    "TorchftQuorum",
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
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'ftaudit.eventlog' has no attribute {name!r}")
    value = getattr(import_module(f"ftaudit.eventlog.{home}"), name)
    # importing a submodule may bind its name here (``connect``): bind the value instead
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
