"""A run's history as data: incarnations, attempts, faults, heals, checkpoints, metrics and
witness coverage, read from one session for ``ftaudit show`` and ``ftaudit report`` (the
renderers in ``verifier/render/`` only draw it).

Everything here is read from the same views the rules use (``timeline``,
``committed_steps``, ``attempt_end``...), so a picture never disagrees with the verifier
about which attempt was committed. Witness coverage is the verifier's coverage
model (``verifier/coverage.py``), the one FT004 judges with: the "expected" count drawn for a
step is exactly what the rule compared.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from dataclasses import dataclass, field

from ftaudit.verifier.context import CellResult, RunContext, parse_cells
from ftaudit.verifier.coverage import StepCoverage
from ftaudit.verifier.coverage_bulk import step_coverage
from ftaudit.verifier.session import Session

AttemptKey = tuple[int, int, int]
"""(incarnation, step, attempt)."""


@dataclass(frozen=True)
class IncarnationInfo:
    number: int
    resumed_iteration: int | None
    resumed_incarnation: int | None
    first_step: int | None
    last_step: int | None
    status: str
    """``completed``/``failed``/... from its run_finished, else ``no end`` (it died)."""
    in_lineage: bool
    """Whether any of its steps belong to the committed history."""

    @property
    def resume_text(self) -> str:
        if self.resumed_iteration is None:
            return "fresh start"
        return (
            f"resumed from checkpoint {self.resumed_iteration} "
            f"(saved by incarnation {self.resumed_incarnation})"
        )


@dataclass(frozen=True)
class CellState:
    """One cell in one attempt: ``normal``, ``discarded`` or ``errored``."""

    cell: int
    state: str


@dataclass(frozen=True)
class AttemptInfo:
    incarnation: int
    step: int
    attempt: int
    status: str
    """``committed``, ``retried``, ``rolled_back`` or ``unfinished`` (the timeline view)."""
    cells: tuple[CellState, ...]
    """Empty when the driver logged no decision (the attempt never ended)."""

    @property
    def key(self) -> AttemptKey:
        return (self.incarnation, self.step, self.attempt)

    @property
    def anchor(self) -> str:
        return f"t-i{self.incarnation}-s{self.step}-a{self.attempt}"


@dataclass(frozen=True)
class FaultInfo:
    incarnation: int
    step: int | None
    attempt: int | None
    mode: str
    target: str
    cell: int | None


@dataclass(frozen=True)
class CheckpointInfo:
    iteration: int
    incarnation: int
    resumed_by: tuple[int, ...]
    """Incarnations that resumed from this checkpoint (its restores)."""


@dataclass(frozen=True)
class ReconfigInfo:
    incarnation: int
    step: int | None
    quorum_id: int
    heal_source: int | None
    healed_cells: tuple[int, ...]
    alive_cells: tuple[int, ...]


@dataclass(frozen=True)
class MetricPoint:
    incarnation: int
    step: int
    attempt: int
    status: str
    value: float
    writers: int
    """How many writers logged this metric in this attempt (the value is their mean)."""


@dataclass
class RunHistory:
    run_dir: str
    buffer_size: int | None = None
    cells: tuple[int, ...] = ()
    incarnations: list[IncarnationInfo] = field(default_factory=list)
    attempts: list[AttemptInfo] = field(default_factory=list)
    faults: list[FaultInfo] = field(default_factory=list)
    checkpoints: list[CheckpointInfo] = field(default_factory=list)
    reconfigs: list[ReconfigInfo] = field(default_factory=list)
    metrics: dict[str, list[MetricPoint]] = field(default_factory=dict)
    coverage: list[StepCoverage] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        return sorted({a.step for a in self.attempts})

    @property
    def committed_steps(self) -> list[int]:
        return sorted({a.step for a in self.attempts if a.status == "committed"})

    def attempts_of(self, incarnation: int) -> list[AttemptInfo]:
        return [a for a in self.attempts if a.incarnation == incarnation]

    def retries(self) -> int:
        return sum(a.status == "retried" for a in self.attempts)


def _state(cell: CellResult) -> str:
    if cell.errored:
        return "errored"
    if cell.discarded:
        return "discarded"
    return "normal" if cell.ranks else "unknown"


def _cells(value: object) -> tuple[CellState, ...]:
    return tuple(CellState(c, _state(r)) for c, r in sorted(parse_cells(value).items()))


def _mean(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    if len(finite) != len(values):
        return math.nan
    return sum(finite) / len(finite)


def collect(run: str | os.PathLike[str] | Session) -> RunHistory:
    """Read a run's history from an opened session (or open one for ``run``); raises
    ``UnusableInputError`` like :func:`~ftaudit.verifier.verify` does."""
    if isinstance(run, Session):
        return _collect(run)
    with Session.open(run) as session:
        return _collect(session)


def _collect(session: Session) -> RunHistory:
    ctx = RunContext(session)
    pic = RunHistory(run_dir=os.fspath(session.run_dir), buffer_size=ctx.buffer_size)
    pic.attempts = _attempts(ctx)
    pic.incarnations = _incarnations(ctx, pic.attempts)
    pic.faults = _faults(ctx)
    pic.checkpoints = _checkpoints(ctx, pic.incarnations)
    pic.reconfigs = _reconfigs(ctx)
    pic.cells = tuple(
        sorted(
            {c.cell for a in pic.attempts for c in a.cells}
            | {f.cell for f in pic.faults if f.cell is not None}
            | {c for r in pic.reconfigs for c in (*r.alive_cells, *r.healed_cells)}
        )
    )
    pic.metrics = _metrics(ctx, {a.key: a.status for a in pic.attempts})
    pic.coverage = step_coverage(ctx)
    return pic


def _attempts(ctx: RunContext) -> list[AttemptInfo]:
    """Every (incarnation, step, attempt) any event names, with the driver's verdict."""
    decisions: dict[AttemptKey, tuple[CellState, ...]] = {}
    for r in ctx.rows(
        "SELECT incarnation, step, attempt, cells FROM attempt_end ORDER BY seq",
        label="attempt ends",
    ):
        decisions[(r["incarnation"], r["step"], r["attempt"])] = _cells(r["cells"])
    for r in ctx.rows(
        "SELECT incarnation, step, accepted_attempt AS attempt, cells FROM step_end ORDER BY seq",
        label="step ends",
    ):
        decisions.setdefault((r["incarnation"], r["step"], r["attempt"]), _cells(r["cells"]))
    resumed = {n: i.resumed_iteration for n, i in ctx.incarnations.items()}
    out = []
    for r in ctx.rows(
        "SELECT incarnation, step, attempt, status FROM timeline "
        "ORDER BY incarnation, step, attempt",
        label="timeline",
    ):
        key = (r["incarnation"], r["step"], r["attempt"])
        after = resumed.get(key[0])
        if after is not None and key[1] <= after and key not in decisions:
            continue  # a restore's bookkeeping (checksums after load), not a training step
        out.append(AttemptInfo(*key, r["status"], decisions.get(key, ())))
    return out


def _incarnations(ctx: RunContext, attempts: list[AttemptInfo]) -> list[IncarnationInfo]:
    finished = {
        r["incarnation"]: r["status"]
        for r in ctx.rows(
            "SELECT incarnation, max(status) AS status FROM run_finished GROUP BY incarnation",
            label="run finished",
        )
    }
    lineage = {a.incarnation for a in attempts if a.status == "committed"}
    out = []
    for number, inc in sorted(ctx.incarnations.items()):
        steps = [a.step for a in attempts if a.incarnation == number]
        out.append(
            IncarnationInfo(
                number=number,
                resumed_iteration=inc.resumed_iteration,
                resumed_incarnation=inc.resumed_incarnation,
                first_step=min(steps) if steps else None,
                last_step=max(steps) if steps else None,
                status=finished.get(number, "no end"),
                in_lineage=number in lineage,
            )
        )
    return out


def _faults(ctx: RunContext) -> list[FaultInfo]:
    return [
        FaultInfo(r["incarnation"], r["step"], r["attempt"], r["mode"], r["target"], r["cell"])
        for r in ctx.rows(
            "SELECT incarnation, step, attempt, mode, target, cell FROM fault_injected "
            "ORDER BY incarnation, step NULLS LAST, ts",
            label="faults",
        )
    ]


def _checkpoints(ctx: RunContext, incarnations: list[IncarnationInfo]) -> list[CheckpointInfo]:
    """The complete checkpoints, each with the incarnations that resumed from it."""
    resumed_by: dict[tuple[int, int], list[int]] = defaultdict(list)
    for inc in incarnations:
        if inc.resumed_iteration is not None and inc.resumed_incarnation is not None:
            resumed_by[(inc.resumed_iteration, inc.resumed_incarnation)].append(inc.number)
    out = []
    for r in ctx.rows(
        "SELECT DISTINCT iteration, incarnation FROM checkpoints WHERE complete "
        "ORDER BY incarnation, iteration",
        label="checkpoints",
    ):
        key = (r["iteration"], r["incarnation"])
        out.append(CheckpointInfo(*key, tuple(resumed_by.get(key, ()))))
    return out


def _reconfigs(ctx: RunContext) -> list[ReconfigInfo]:
    return [
        ReconfigInfo(
            r["incarnation"],
            r["step"],
            r["quorum_id"],
            r["heal_source"],
            tuple(r["healed_cells"] or ()),
            tuple(r["alive_cells"] or ()),
        )
        for r in ctx.rows(
            "SELECT incarnation, step, quorum_id, heal_source, healed_cells, alive_cells "
            "FROM cell_reconfigured ORDER BY incarnation, seq",
            label="reconfigurations",
        )
    ]


def _metrics(ctx: RunContext, status: dict[AttemptKey, str]) -> dict[str, list[MetricPoint]]:
    """One point per attempt and name: the mean over the writers that logged it."""
    values: dict[tuple[str, AttemptKey], list[float]] = defaultdict(list)
    for r in ctx.rows(
        "SELECT incarnation, step, attempt, name, value FROM metrics "
        "WHERE step IS NOT NULL AND attempt IS NOT NULL "
        "ORDER BY name, incarnation, step, attempt, writer",
        label="metrics",
    ):
        values[(r["name"], (r["incarnation"], r["step"], r["attempt"]))].append(r["value"])
    out: dict[str, list[MetricPoint]] = {}
    for (name, key), vals in values.items():
        out.setdefault(name, []).append(
            MetricPoint(*key, status.get(key, "unknown"), _mean(vals), len(vals))
        )
    return out
