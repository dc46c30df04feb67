"""The event types of a run: ftaudit's public schema.

Every event is a strict, frozen pydantic model with a ``type`` literal; together they
form the discriminated union :data:`AnyEvent`. The envelope (timestamp, run id,
incarnation, source, writer, sequence number) is added by the writer, see
:class:`ftaudit.eventlog.record.Envelope`; ``step`` and ``attempt`` live on the event and,
when left unset, the writer takes them from :func:`ftaudit.eventlog.context.step_context`.

Schema rules (checked by ``tests/eventlog/test_schema_snapshot.py``): add fields only at
the top level of an event and always with a default, so older segments still read;
raise :data:`SCHEMA_VERSION` and record the field in ``eventlog/layouts.py`` (which
version added it); never rename or retype a field. After any change, regenerate the
stored layouts the verifier reads (``python -m ftaudit.eventlog.describe``; a test fails
while they differ). The enums and checksum tags live in ``eventlog/vocabulary.py``.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ftaudit.eventlog.intruns import IntRuns
from ftaudit.eventlog.layouts import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported
from ftaudit.eventlog.vocabulary import SHARD_TAG as SHARD_TAG
from ftaudit.eventlog.vocabulary import WHOLE_TAG as WHOLE_TAG
from ftaudit.eventlog.vocabulary import (
    ChecksumWhen,
    FaultMode,
    LoaderWhen,
    RankOutcome,
    RunStatus,
)
from ftaudit.eventlog.vocabulary import tensor_of as tensor_of


class Event(BaseModel):
    """Base of every event type, built-in or user-registered."""

    # a model's validator is built when it first validates (a writer's first event of
    # the type), not at import: the verifier never validates an event, and building them
    # all cost every ``ft-verify`` about 0.05 s CPU
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)

    type: str
    step: int | None = None
    attempt: int | None = None

    needs_step: ClassVar[bool] = False
    """When true the writer refuses the event if neither it nor the context gives a step."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", defer_build=True)


class CheckpointRef(_Model):
    """A checkpoint: its iteration and the incarnation that saved it."""

    iteration: int = Field(ge=0)
    incarnation: int = Field(ge=0)


class CellOutcome(_Model):
    """One cell's result of an attempt: ``errored`` (the cell crashed) or its ranks' outcomes."""

    errored: bool = False
    ranks: list[RankOutcome] = []

    @property
    def all_normal(self) -> bool:
        return (
            not self.errored
            and bool(self.ranks)
            and all(o is RankOutcome.NORMAL for o in self.ranks)
        )


class RunStarted(Event):
    """An incarnation started, fresh (``resumed_from`` is None, incarnation 0) or resumed."""

    type: Literal["run_started"] = "run_started"
    resumed_from: CheckpointRef | None = None
    buffer_size: int = Field(gt=0)
    config_json: str = "{}"
    dataset_size: int | None = None
    deterministic_order: bool | None = None
    status: RunStatus = RunStatus.RUNNING


class WriterHead(_Model):
    """Where a writer's log stood: its last sealed sequence number and that segment's digest.

    The digest vouches for every event of the writer up to ``last_seq`` (the hash chain),
    so a recorded head makes any later truncation or rewrite of those events visible.
    """

    last_seq: int = Field(ge=-1)
    digest: str = ""


class RunFinished(Event):
    """The driver ends an incarnation; ``final_heads`` is every writer's head at that moment.

    ``final_heads`` covers every writer of the run (read from the run directory, the
    driver's own from memory), so a truncated log (the last steps' records, a worker's
    tail, a whole writer) contradicts it.
    """

    type: Literal["run_finished"] = "run_finished"
    status: RunStatus = RunStatus.COMPLETED
    final_heads: dict[str, WriterHead] = {}
    mac: str = ""
    """HMAC-SHA256 of this record, set by a writer that holds the run's key ("" without one;
    see ``eventlog/keys.py``)."""


class WitnessAllocated(Event):
    """Witness ids handed out for one attempt of a step; the k-th id trains the k-th sample."""

    type: Literal["witness_allocated"] = "witness_allocated"
    needs_step: ClassVar[bool] = True
    num_ids: int = Field(ge=0)
    counter_after: int = Field(ge=0)
    witness_ids: IntRuns
    sample_indices: IntRuns
    stale_ids: IntRuns

    @model_validator(mode="after")
    def _aligned(self) -> WitnessAllocated:
        if len(self.witness_ids) != self.num_ids or len(self.sample_indices) != self.num_ids:
            raise ValueError("witness_ids and sample_indices must both hold num_ids values")
        return self


class WitnessSnapshot(Event):
    """The nonzero witness rows one trainer rank saw after an optimizer step."""

    type: Literal["witness_snapshot"] = "witness_snapshot"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    instance: str
    nonzero_ids: IntRuns
    stale_ids: IntRuns


class WitnessCleared(Event):
    """Witness slots one trainer rank zeroed after a discarded attempt (no optimizer step).

    Zeroing the attempt's stale slots even though it did not commit keeps the ring exact
    for the retry: the retry's ids then start from cleared rows, so a step may be retried
    any number of times (each attempt within ``B - keep`` ids). The stale slots hold only
    evidence that no later snapshot checks, so nothing is lost.
    """

    type: Literal["witness_cleared"] = "witness_cleared"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    stale_ids: IntRuns


class SampleAdvantageSummary(Event):
    """Per sample of one trainer rank: its witness id, local token count, all-zero advantage."""

    type: Literal["sample_advantage_summary"] = "sample_advantage_summary"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    witness_ids: list[int]
    token_counts: list[int]
    all_zero: list[bool]
    pure_advantage_loss: bool | None = None
    """Whether the loss is a pure advantage loss (every loss term scales with the advantage),
    so an all-zero advantage means an exactly zero gradient and the sample is excused.
    False (a KL penalty, an entropy bonus...): such samples are expected like any other.
    None: not declared (logs of older hooks), read as True."""

    @model_validator(mode="after")
    def _aligned(self) -> SampleAdvantageSummary:
        if not len(self.witness_ids) == len(self.token_counts) == len(self.all_zero):
            raise ValueError("witness_ids, token_counts and all_zero must have the same length")
        return self


class StepEnd(Event):
    """The driver moved on from a step: the accepted attempt and each cell's outcome in it."""

    type: Literal["step_end"] = "step_end"
    needs_step: ClassVar[bool] = True
    accepted_attempt: int = Field(ge=0)
    cells: dict[int, CellOutcome]


class AttemptEnd(Event):
    """The driver's decision on one attempt: accepted or retried, with each cell's outcome."""

    type: Literal["attempt_end"] = "attempt_end"
    needs_step: ClassVar[bool] = True
    accepted: bool
    cells: dict[int, CellOutcome]


class CellReconfigured(Event):
    type: Literal["cell_reconfigured"] = "cell_reconfigured"
    quorum_id: int
    heal_source: int | None = None
    """The cell the healed cells copied their state from."""
    healed_cells: list[int] = []
    alive_cells: list[int] = []


class TorchftQuorum(Event):
    """torchft's quorum record (logger ``torchft_quorums``): this replica group's rank
    ``group_rank`` joined quorum ``quorum_id`` at torchft step ``torchft_step``."""

    type: Literal["torchft_quorum"] = "torchft_quorum"
    quorum_id: int
    torchft_step: int
    replica_id: str = ""
    group_rank: int = 0


class TorchftCommit(Event):
    """torchft's commit record (logger ``torchft_commits``): ``should_commit()`` returned
    ``commit_result`` for this rank at torchft step ``torchft_step`` in ``quorum_id``."""

    type: Literal["torchft_commit"] = "torchft_commit"
    quorum_id: int
    torchft_step: int
    commit_result: bool
    replica_id: str = ""
    group_rank: int = 0


class CheckpointSaved(Event):
    """Checkpoint ``iteration`` is durable; ``writers`` is the log snapshot at that moment.

    Every process that saved part of it logs one, with its own writers' last durable
    sequence numbers; the driver's (``complete=True``) marks the checkpoint complete.
    """

    type: Literal["checkpoint_saved"] = "checkpoint_saved"
    iteration: int = Field(ge=0)
    path: str = ""
    writers: dict[str, int] = {}
    complete: bool = False
    chain_heads: dict[str, str] = {}
    """Per writer of ``writers``: the digest of its segment ending at that sequence number,
    which vouches for every event up to it (see ``eventlog/README.md``, tamper evidence)."""
    job_heads: dict[str, WriterHead] = {}
    """The driver's checkpoint only: the head of every writer of the run (every process,
    every incarnation), read from the run directory when the checkpoint was recorded."""
    mac: str = ""
    """HMAC-SHA256 of this record, set by a writer that holds the run's key ("" without one;
    see ``eventlog/keys.py``)."""


class TrainerWeightChecksum(Event):
    """One hash per tensor (parameters, buffers, optimizer state) held by one trainer rank."""

    type: Literal["trainer_weight_checksum"] = "trainer_weight_checksum"
    when: ChecksumWhen
    cell: int = Field(ge=0)
    rank: int = Field(ge=0)
    hashes: dict[str, str]
    checkpoint: CheckpointRef | None = None
    heal_source: int | None = None
    """For ``after_heal``: the cell this rank's state was copied from."""
    replica_local: list[str] = []
    """Tensors of ``hashes`` that differ between cells by design (e.g. batch-norm running
    statistics of each cell's own data): left out of the cross-replica comparison, still
    compared at save/load and heal."""


class EngineWeightChecksum(Event):
    """After a weight sync (``step`` None: the initial sync), each engine's tensor hashes."""

    type: Literal["engine_weight_checksum"] = "engine_weight_checksum"
    engines: dict[int, dict[str, str]]


class Metric(Event):
    type: Literal["metric"] = "metric"
    values: dict[str, float]


class FaultInjected(Event):
    type: Literal["fault_injected"] = "fault_injected"
    mode: FaultMode
    target: str
    cell: int | None = None
    rank: int | None = None


class SampleFingerprints(Event):
    """What one trainer rank fed the model in one attempt, per sample.

    The k-th sample sits at stream position ``sample_indices[k]`` (its sample index),
    its content has fingerprint ``fingerprints[k]`` (:mod:`ftaudit.dataset.fingerprint`,
    computed from the tensor the model received) and, where the loader says so, it was
    read from dataset item ``items[k]`` (empty: not given).
    """

    type: Literal["sample_fingerprints"] = "sample_fingerprints"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    sample_indices: IntRuns
    fingerprints: list[int]
    items: list[int] = []

    @model_validator(mode="after")
    def _aligned(self) -> SampleFingerprints:
        n = len(self.fingerprints)
        if len(self.sample_indices) != n or (self.items and len(self.items) != n):
            raise ValueError("sample_indices, fingerprints (and items if given) must align")
        return self


class DataOrder(Event):
    """The order of one epoch of the data stream, as the loader will read it.

    Stream position ``start + k`` reads dataset item ``items[k]``; ``len(items)`` is the
    epoch's length (a sampler that pads the epoch repeats items here).
    """

    type: Literal["data_order"] = "data_order"
    epoch: int = Field(ge=0)
    start: int = Field(ge=0)
    items: list[int]
    dataset_size: int = Field(gt=0)
    seed: int | None = None
    shuffle: bool = False
    sampler: str = ""


class DataManifest(Event):
    """The run trains on the dataset whose manifest has ``digest`` (``ftaudit.dataset``).

    ``path`` is where it is kept, relative to the run directory when inside it; a
    manifest kept elsewhere is found by its digest (``ft-verify --data-manifest``).
    """

    type: Literal["data_manifest"] = "data_manifest"
    digest: str
    dataset_size: int = Field(ge=0)
    algorithm: str
    path: str = ""


class LoaderState(Event):
    """The data loader's state when checkpoint ``iteration`` was saved, or after a resume.

    ``position`` is the next stream position the loader reads; ``epoch`` and ``seed``
    are the sampler's as read from it; ``state_json`` the loader's own state dict.
    """

    type: Literal["loader_state"] = "loader_state"
    iteration: int = Field(ge=0)
    when: LoaderWhen
    position: int = Field(ge=0)
    epoch: int = Field(ge=0)
    seed: int | None = None
    state_json: str = "{}"


class StateAdopted(Event):
    """A trainer rank kept its live state at a resume or heal instead of loading one.

    The explicit alternative to restore evidence (an ``after_load`` or ``after_heal``
    checksum): without either, a resumed rank may be training on weights it never
    reloaded. ``reason`` says why keeping the live state is correct.
    """

    type: Literal["state_adopted"] = "state_adopted"
    cell: int = Field(ge=0)
    rank: int = Field(ge=0)
    reason: str = Field(min_length=1)
    checkpoint: CheckpointRef | None = None
    """At a resume: the checkpoint the incarnation names, which this rank did not load."""
    heal_source: int | None = None
    """At a heal: the cell it would have copied from."""


class WitnessGradient(Event):
    """The nonzero rows of one witness's gradient after the all-reduce, before the step.

    It must hold exactly the attempt's own witness ids: a row of another attempt means a
    gradient that was never cleared (``zero_grad`` skipped) is applied again.
    """

    type: Literal["witness_gradient"] = "witness_gradient"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    rank: int = Field(ge=0)
    instance: str
    nonzero_ids: IntRuns


class StepApplied(Event):
    """A trainer rank applied the attempt's optimizer step; its step counters after it.

    ``counters`` maps a counter (``optimizer``: the optimizer's own step count; a
    registered scheduler's ``last_epoch``) to its value after the step. Each must grow
    by exactly one per committed step.
    """

    type: Literal["step_applied"] = "step_applied"
    needs_step: ClassVar[bool] = True
    cell: int = Field(ge=0)
    rank: int = Field(ge=0)
    counters: dict[str, int] = {}


class ParameterManifest(Event):
    """The trainable parameters of one trainer rank: name, shape, dtype, flag, group.

    Logged when a rank starts training and whenever the manifest changes. ``digest``
    identifies the whole manifest; ``declared_change`` is non-empty when the change
    from the previous manifest is intended (e.g. unfreezing a layer on schedule).
    """

    type: Literal["parameter_manifest"] = "parameter_manifest"
    cell: int = Field(ge=0)
    rank: int = Field(ge=0)
    digest: str
    names: list[str]
    shapes: list[list[int]]
    dtypes: list[str]
    requires_grad: list[bool]
    groups: list[int]
    """The optimizer param group of each parameter; -1 when no group holds it."""
    declared_change: str = ""

    @model_validator(mode="after")
    def _aligned(self) -> ParameterManifest:
        n = len(self.names)
        lengths = (len(self.shapes), len(self.dtypes), len(self.requires_grad), len(self.groups))
        if any(k != n for k in lengths):
            raise ValueError("names, shapes, dtypes, requires_grad and groups must align")
        return self


BUILTIN_EVENTS: tuple[type[Event], ...] = (
    RunStarted,
    RunFinished,
    WitnessAllocated,
    WitnessSnapshot,
    WitnessCleared,
    SampleAdvantageSummary,
    StepEnd,
    AttemptEnd,
    CellReconfigured,
    TorchftQuorum,
    TorchftCommit,
    CheckpointSaved,
    TrainerWeightChecksum,
    EngineWeightChecksum,
    Metric,
    FaultInjected,
    SampleFingerprints,
    DataOrder,
    DataManifest,
    LoaderState,
    StateAdopted,
    WitnessGradient,
    StepApplied,
    ParameterManifest,
)

AnyEvent = Annotated[
    RunStarted
    | RunFinished
    | WitnessAllocated
    | WitnessSnapshot
    | WitnessCleared
    | SampleAdvantageSummary
    | StepEnd
    | AttemptEnd
    | CellReconfigured
    | TorchftQuorum
    | TorchftCommit
    | CheckpointSaved
    | TrainerWeightChecksum
    | EngineWeightChecksum
    | Metric
    | FaultInjected
    | SampleFingerprints
    | DataOrder
    | DataManifest
    | LoaderState
    | StateAdopted
    | WitnessGradient
    | StepApplied
    | ParameterManifest,
    Field(discriminator="type"),
]
"""The built-in events as one discriminated union; user types go through the registry."""
