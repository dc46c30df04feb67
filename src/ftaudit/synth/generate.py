"""Write a large synthetic run through the public event API, valid or with one defect.

The generator plays every process of a fault-tolerant job in one Python process, each
with its own :class:`~ftaudit.eventlog.EventWriter` (a driver, one trainer per cell and
rank): allocations and step decisions from the driver, witness snapshots and weight
checksums from each trainer rank, checkpoints, retried attempts and restarts from a
checkpoint with rolled-back work left on disk. It simulates the witness rows of each
cell the way SPEC §3 says the model behaves (the rows of trained ids become nonzero,
committed steps clear the stale rows, a restore brings back the checkpoint's rows), so
a run without a planted bug verifies clean by construction.

Id sets are :class:`IntRuns` arcs throughout, so writing one step costs the same for a
ring of 4,096 slots as for one of a million.

Every trainer rank also logs the content fingerprints of the samples its cell fed (each
cell a contiguous shard of the step's samples; a discarded attempt fed them too) and the
driver declares the synthetic dataset's manifest (:mod:`ftaudit.synth.dataset`), so rule
FT008 checks the data of a synthetic run like a real one's.
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ftaudit.errors import UsageError
from ftaudit.eventlog import (
    AttemptEnd,
    CellOutcome,
    CheckpointRef,
    ChecksumWhen,
    DataManifest,
    Driver,
    EventWriter,
    IntRuns,
    ParameterManifest,
    RankOutcome,
    RunLog,
    RunStatus,
    SampleFingerprints,
    StepApplied,
    StepEnd,
    Trainer,
    TrainerWeightChecksum,
    WitnessAllocated,
    WitnessGradient,
    WitnessSnapshot,
    WriterOptions,
)
from ftaudit.eventlog.ring import max_ids_per_step
from ftaudit.eventlog.rundir import SEGMENT_SUFFIX, is_run, segment_path, segment_range
from ftaudit.synth.bugs import SynthBug, get_bug
from ftaudit.synth.dataset import SynthDataset
from ftaudit.synth.ring import AllocationArcs, RunRing
from ftaudit.synth.slots import SlotSet

TENSORS = (
    "layers.0.weight",
    "layers.0.bias",
    "optim.exp_avg.layers.0.weight",
    "optim.exp_avg_sq.layers.0.weight",
    "group/0/lr",
    "stateful/lr_scheduler",
)
PARAMETERS = (("layers.0.weight", [64, 64]), ("layers.0.bias", [64]), ("head.weight", [32, 64]))
"""The trainable-parameter manifest of every rank (the ``head-frozen`` bug freezes the head)."""
INSTANCES = ("chunk0.head", "chunk0.tail")


_NEEDS_A_STEP_BEFORE = ("skipped_step", "sample_twice", "stream_jumps_back")
"""The bugs that act on a step before the bug step's."""


@dataclass(frozen=True)
class SynthConfig:
    """The shape of a synthetic run."""

    steps: int
    cells: int = 2
    ranks: int = 1
    buffer_size: int = 65_536
    samples_per_step: int = 1_024
    restarts: int = 0
    retries: int = 0
    bug: str | None = None
    seed: int = 0
    checkpoint_every: int | None = None
    """Steps between checkpoints; default ``max(1, steps // 10)``."""
    flush_every: int = 50
    """Every writer flushes a segment after this many steps (and at each checkpoint)."""
    roll_segments: int = WriterOptions.roll_segments
    """Every writer rolls this many small segments into one (0: never; see WriterOptions)."""
    instances: tuple[str, ...] = INSTANCES
    fsync: bool = False
    bug_step: int | None = None
    """Where the bug strikes; default near the end, in the final incarnation."""
    fingerprints: bool = True
    """Log what each cell fed and declare the dataset's manifest (FT008 checks them)."""
    manifest: bool = True
    """Keep and declare the dataset's manifest with the fingerprints (False: FT008 checks
    that contents agree and do not repeat in an epoch, not that they are the items)."""
    dataset_size: int | None = None
    """Items of the synthetic dataset (position ``p`` reads item ``p mod N``); default
    ``min(steps * samples_per_step, 65,536)``, so a long run goes through several epochs."""

    @property
    def items(self) -> int:
        """The dataset's size ``N``."""
        return self.dataset_size or min(self.steps * self.samples_per_step, 65_536)

    def check(self) -> None:
        """Raise ``ValueError`` for a shape the generator cannot make valid."""
        if self.steps < 1 or self.cells < 1 or self.ranks < 1:
            raise UsageError("steps, cells and ranks must be at least 1")
        if self.samples_per_step < 1:
            raise UsageError("samples per step must be at least 1")
        if self.dataset_size is not None and self.dataset_size < self.samples_per_step:
            raise UsageError(
                f"a dataset of {self.dataset_size} items cannot fill a step of "
                f"{self.samples_per_step} distinct samples"
            )
        limit = max_ids_per_step(self.buffer_size)
        if self.samples_per_step > limit:
            raise UsageError(
                f"{self.samples_per_step} samples per step exceed B - floor(0.7 B) = {limit} "
                f"for B = {self.buffer_size}: use a larger buffer size"
            )
        retried = self.retries > 0 or self.bug == "leaked_attempt"
        if retried and 2 * self.samples_per_step > limit:
            raise UsageError(
                f"a retried step allocates twice {self.samples_per_step} ids, more than "
                f"B - floor(0.7 B) = {limit} for B = {self.buffer_size}: use a larger buffer "
                "size or fewer samples per step"
            )
        if self.restarts < 0 or self.retries < 0:
            raise UsageError("restarts and retries must be non-negative")
        if self.retries > self.steps:
            raise UsageError(f"cannot retry {self.retries} of {self.steps} steps")
        if not self.instances:
            raise UsageError("at least one snapshot instance is needed")
        if self.bug is not None:
            bug = get_bug(self.bug)
            if bug.name in ("checksum_mismatch", "peer_shard_content") and self.cells < 2:
                raise UsageError(f"the {bug.name} bug needs at least 2 cells")
            if bug.rule == "FT008" and not self.fingerprints:
                raise UsageError(f"the {bug.name} bug needs fingerprints (FT008 checks them)")
            if bug.name in _NEEDS_A_STEP_BEFORE and self.steps < 3:
                raise UsageError(f"the {bug.name} bug needs at least 3 steps")
            if bug.needs_restart and self.steps < 4:
                raise UsageError(f"the {bug.name} bug needs at least 4 steps (a restart)")


@dataclass(frozen=True)
class SynthResult:
    run_dir: Path
    config: SynthConfig
    incarnations: int
    events: int
    seconds: float
    bug: SynthBug | None
    bug_step: int | None
    retried_steps: tuple[int, ...]
    crashes: tuple[tuple[int, int], ...]
    """(step the incarnation died after, checkpoint iteration the next resumed from)."""

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class _Plan:
    checkpoint_every: int
    crashes: tuple[tuple[int, int], ...]
    retried: frozenset[int]
    bug_step: int | None
    discarding_cell: dict[int, int]


def _checkpoint_before(step: int, every: int) -> int:
    """The last checkpoint iteration at or before ``step`` (-1: none yet)."""
    return (step + 1) // every * every - 1


def plan(config: SynthConfig) -> _Plan:
    """Where the job crashes and resumes, which steps are retried, where the bug strikes."""
    rng = random.Random(config.seed)
    every = config.checkpoint_every or max(1, config.steps // 10)
    bug = get_bug(config.bug) if config.bug else None
    restarts = max(config.restarts, 1 if bug and bug.needs_restart else 0)
    crashes: list[tuple[int, int]] = []
    last = -1
    for j in range(restarts):
        base = (j + 1) * config.steps // (restarts + 1)
        # die half a checkpoint interval after a save, so that some work is rolled back
        target = _checkpoint_before(base, every) + max(1, every // 2)
        target = min(max(target, last + 1, every), config.steps - 2)
        if target <= last or target < 0:
            continue  # too short a run for this many restarts
        crashes.append((target, _checkpoint_before(target, every)))
        last = target
    final_first = crashes[-1][1] + 1 if crashes else 0
    bug_step: int | None = None
    if bug is not None:
        if bug.needs_restart:
            if not crashes:
                raise UsageError(f"the {bug.name} bug needs a restart: use more steps")
            bug_step = final_first
        else:
            floor = 1 if bug.name in _NEEDS_A_STEP_BEFORE else 0
            default = max(final_first, floor, config.steps - 3)
            bug_step = config.bug_step if config.bug_step is not None else default
            if not (max(final_first, floor) <= bug_step < config.steps):
                raise UsageError(
                    f"bug step {bug_step} must be in [{max(final_first, floor)}, {config.steps})"
                )
    retried = set(rng.sample(range(config.steps), config.retries)) if config.retries else set()
    if bug is not None and bug.name == "leaked_attempt" and bug_step is not None:
        retried.add(bug_step)
    discarding = {s: rng.randrange(config.cells) for s in sorted(retried)}
    return _Plan(every, tuple(crashes), frozenset(retried), bug_step, discarding)


_LOADER_SHIFT = {"stream_skips_after_resume": 1, "stream_replays_after_resume": -1}
"""The batches a resumed incarnation's loader restarts ahead of its checkpoint's position."""


@dataclass
class _Incarnation:
    log: RunLog
    ring: RunRing
    driver: EventWriter
    trainers: dict[tuple[int, int], EventWriter]
    weights: dict[int, SlotSet]
    next_sample: int
    resumed_at: int = 0
    """The stream position its loader resumed reading from (0: a fresh start)."""
    last_ids: IntRuns = field(default_factory=IntRuns)
    """The witness ids of the last committed allocation."""


@dataclass
class _Generator:
    config: SynthConfig
    run_dir: Path
    plan: _Plan
    bug: SynthBug | None
    options: WriterOptions
    events: int = 0
    max_counter: int = 0
    saved: dict[tuple[int, int], tuple[dict[int, SlotSet], int, int]] = field(default_factory=dict)
    """(iteration, incarnation) -> (rows of each cell, allocator counter, next sample)."""
    lost_segment: Path | None = None
    tried: set[int] = field(default_factory=set)
    dataset: SynthDataset | None = None
    """What the cells feed; None: the run logs no fingerprints."""
    declared: DataManifest | None = None

    # -- incarnations -------------------------------------------------------------------
    def start(self, resume: CheckpointRef | None, abandoned: _Incarnation | None) -> _Incarnation:
        cfg = self.config
        log = RunLog.start(
            self.run_dir,
            buffer_size=cfg.buffer_size,
            resume_from=resume,
            config={
                "generator": "ftaudit synth",
                "cells": cfg.cells,
                "ranks": cfg.ranks,
                "samples_per_step": cfg.samples_per_step,
                "seed": cfg.seed,
                "bug": cfg.bug,
            },
            deterministic_order=True,
            dataset_size=cfg.items if self.dataset is not None else None,
            options=self.options,
        )
        self.events += 1
        trainers = {
            (c, r): log.writer(Trainer(cell_index=c, rank_within_cell=r))
            for c in range(cfg.cells)
            for r in range(cfg.ranks)
        }
        inc = _Incarnation(
            log=log,
            ring=RunRing(cfg.buffer_size),
            driver=log.writer(Driver()),
            trainers=trainers,
            weights={c: SlotSet() for c in range(cfg.cells)},
            next_sample=0,
        )
        first = resume.iteration + 1 if resume is not None else 0
        bug = self.bug.name if self.bug and first == self.plan.bug_step else None
        if self.dataset is not None and self.config.manifest:
            if self.declared is None:
                self.declared = self.dataset.declare(self.run_dir)
            self._log(inc.driver, self.declared)
        for (c, r), writer in trainers.items():
            self._log(writer, _manifest(first, c, r, frozen=bug == "head_frozen" and c == 0))
        if resume is None:
            return inc
        rows, counter, next_sample = self.saved[(resume.iteration, resume.incarnation)]
        # the hooks resume from the highest counter ever logged, not the checkpoint's
        inc.ring.resume(counter if bug == "reissued_ids" else self.max_counter)
        inc.weights = dict(rows)
        if bug == "not_rolled_back" and abandoned is not None:
            inc.weights[0] = abandoned.weights[0]
        # a loader restored one batch off the checkpoint's position
        shift = _LOADER_SHIFT.get(bug or "", 0) * self.config.samples_per_step
        inc.next_sample = inc.resumed_at = next_sample + shift
        for (c, r), writer in trainers.items():
            if bug == "no_restore_evidence" and c == 0:
                continue  # cell 0 kept what its process held and said nothing
            hashes = (
                self._hashes(-1 - (abandoned.ring.counter if abandoned else 0), r)
                if bug == "not_rolled_back" and c == 0
                else self._hashes(resume.iteration, r)
            )
            if bug == "scheduler_not_restored":
                hashes = {**hashes, "stateful/lr_scheduler": _digest("a fresh scheduler")}
            self._log(
                writer,
                TrainerWeightChecksum(
                    when=ChecksumWhen.AFTER_LOAD,
                    cell=c,
                    rank=r,
                    hashes=hashes,
                    checkpoint=resume,
                ),
            )
        # allocate(0) and zero the stale slots at the resumed counter, before any step
        zero = self._allocate(inc, first, 0, 0, ())
        stale = SlotSet.from_runs(zero.stale_ids)
        # Also zero every slot the abandoned timeline allocated after the checkpoint: when
        # it ran past B - keep ids, restored rows sit in slots whose most recent allocation
        # is abandoned, and zeroing only the B - keep slots ahead (SPEC §2) would leave
        # them to be reported as leaked work. Wiped evidence was checked by earlier steps.
        span = min(inc.ring.counter - counter, self.config.buffer_size)
        abandoned_slots = SlotSet.from_runs(IntRuns.arc(counter, span, self.config.buffer_size))
        inc.weights = {c: w - stale - abandoned_slots for c, w in inc.weights.items()}
        return inc

    def checkpoint(self, inc: _Incarnation, step: int) -> None:
        ref = CheckpointRef(iteration=step, incarnation=inc.log.incarnation)
        self.saved[(step, ref.incarnation)] = (dict(inc.weights), inc.ring.counter, inc.next_sample)
        late = self.bug is not None and self.bug.name == "checkpoint_late"
        late = late and self.plan.bug_step is not None and step >= self.plan.bug_step
        for (c, r), writer in inc.trainers.items():
            self._log(
                writer,
                TrainerWeightChecksum(
                    step=step,
                    attempt=0,
                    when=ChecksumWhen.AT_SAVE,
                    cell=c,
                    rank=r,
                    # the late save holds the next step's state under this iteration
                    hashes=self._hashes(step + 1 if late else step, r),
                    checkpoint=ref,
                ),
            )
        inc.log.record_checkpoint(step, path=f"checkpoints/iter_{step:07d}")
        self.events += 1

    # -- one step -----------------------------------------------------------------------
    def step(self, inc: _Incarnation, step: int) -> None:
        cfg = self.config
        bug = self.bug.name if self.bug else None
        at_bug = step == self.plan.bug_step
        S = cfg.samples_per_step
        normal = CellOutcome(ranks=[RankOutcome.NORMAL] * cfg.ranks)
        gap_writer: EventWriter | None = None
        gap_first: int | None = None
        if bug == "sequence_gap" and at_bug:
            gap_writer = inc.trainers[(0, 0)]
            gap_first = gap_writer.flush() + 1  # the step's first event opens a segment
        first_sample = inc.next_sample
        if bug == "sample_twice" and at_bug:
            first_sample -= 1
        elif bug == "stream_jumps_back" and at_bug:  # back to where step // 2 began
            first_sample -= (step - step // 2) * S
        samples = IntRuns(starts=[first_sample], lengths=[S])
        attempt = 0
        if step in self.plan.retried and step not in self.tried:
            self.tried.add(step)
            discarded = self._allocate(inc, step, attempt, S, samples)
            for c in range(cfg.cells):  # every cell fed its shard before one discarded
                self._fed(inc, step, attempt, c, first_sample)
            cells = {c: normal for c in range(cfg.cells)}
            bad = self.plan.discarding_cell[step]
            cells[bad] = CellOutcome(
                ranks=[RankOutcome.DISCARDED_SHOULD_RETRY] + [RankOutcome.NORMAL] * (cfg.ranks - 1)
            )
            self._log(
                inc.driver, AttemptEnd(step=step, attempt=attempt, accepted=False, cells=cells)
            )
            if bug == "leaked_attempt" and at_bug:
                inc.weights[0] = inc.weights[0] | SlotSet.from_runs(discarded.witness_ids)
            attempt += 1
        previous = inc.last_ids
        alloc = self._allocate(
            inc, step, attempt, S, samples, logged=not (bug == "allocation_lost" and at_bug)
        )
        inc.last_ids = alloc.witness_ids
        inc.next_sample = first_sample + S
        trained = SlotSet.from_runs(alloc.witness_ids)
        stale = SlotSet.from_runs(alloc.stale_ids)
        hashes = [self._hashes(step, r) for r in range(cfg.ranks)]
        snapshots: dict[SlotSet, IntRuns] = {}
        for c in range(cfg.cells):
            got = trained
            if bug == "missing_sample" and at_bug and c == cfg.cells - 1:
                got = trained - SlotSet.of(
                    [(alloc.witness_ids.starts[0], alloc.witness_ids.starts[0] + 1)]
                )
            rows = inc.weights[c] | got
            nonzero = snapshots.get(rows)
            if nonzero is None:
                nonzero = snapshots[rows] = rows.to_runs()
            events = [
                WitnessSnapshot(
                    step=step,
                    attempt=attempt,
                    cell=c,
                    instance=instance,
                    nonzero_ids=nonzero,
                    stale_ids=alloc.stale_ids,
                )
                for instance in cfg.instances
            ]
            gradient = alloc.witness_ids
            if bug == "gradient_not_cleared" and at_bug and c == 0:
                gradient = (SlotSet.from_runs(gradient) | SlotSet.from_runs(previous)).to_runs()
            applied = step + (2 if bug == "stepped_twice" and c == 0 and at_bug else 1)
            self._fed(inc, step, attempt, c, first_sample)
            for r in range(cfg.ranks):
                writer = inc.trainers[(c, r)]
                for event in events:
                    self._log(writer, event)
                for instance in cfg.instances:
                    self._log(
                        writer,
                        WitnessGradient(
                            step=step,
                            attempt=attempt,
                            cell=c,
                            rank=r,
                            instance=instance,
                            nonzero_ids=gradient,
                        ),
                    )
                self._log(
                    writer,
                    StepApplied(
                        step=step,
                        attempt=attempt,
                        cell=c,
                        rank=r,
                        counters={"optimizer": applied, "lr_scheduler": applied},
                    ),
                )
                h = hashes[r]
                if bug == "checksum_mismatch" and at_bug and c == cfg.cells - 1 and r == 0:
                    h = {**h, TENSORS[0]: _digest(f"diverged:{step}")}
                self._log(
                    writer,
                    TrainerWeightChecksum(
                        step=step,
                        attempt=attempt,
                        when=ChecksumWhen.AFTER_STEP,
                        cell=c,
                        rank=r,
                        hashes=h,
                    ),
                )
            inc.weights[c] = rows - stale
        cells = {c: normal for c in range(cfg.cells)}
        self._log(inc.driver, AttemptEnd(step=step, attempt=attempt, accepted=True, cells=cells))
        self._log(
            inc.driver, StepEnd(step=step, attempt=attempt, accepted_attempt=attempt, cells=cells)
        )
        if gap_writer is not None and gap_first is not None:
            gap_writer.flush()
            self.lost_segment = segment_path(self.run_dir, gap_writer.writer_id, gap_first)

    def _fed(self, inc: _Incarnation, step: int, attempt: int, cell: int, first: int) -> None:
        """Every rank of ``cell`` logs the fingerprints of the shard the cell fed."""
        if self.dataset is None:
            return
        S, cells = self.config.samples_per_step, self.config.cells
        lo, hi = cell * S // cells, (cell + 1) * S // cells
        if hi == lo:
            return  # more cells than samples: this cell fed nothing
        positions = np.arange(first + lo, first + hi, dtype=np.int64)
        fps = self.dataset.fingerprints(self._content(inc, step, cell, positions, first)).tolist()
        for r in range(self.config.ranks):  # ranks of a cell feed the same rows
            self._log(
                inc.trainers[(cell, r)],
                SampleFingerprints(
                    step=step,
                    attempt=attempt,
                    cell=cell,
                    sample_indices=IntRuns(starts=[first + lo], lengths=[hi - lo]),
                    fingerprints=fps,
                ),
            )

    def _content(
        self, inc: _Incarnation, step: int, cell: int, positions: np.ndarray, first: int
    ) -> np.ndarray:
        """The items whose content ``cell`` fed at ``positions``: their own, unless a bug."""
        bug = self.bug.name if self.bug else None
        bug_step = self.plan.bug_step
        if bug == "peer_shard_content" and step == bug_step and cell == self.config.cells - 1:
            # the cell reads cell 0's shard under its own (correct) sample indices
            return first + np.arange(positions.size, dtype=np.int64)
        final = inc.log.incarnation == len(self.plan.crashes)
        if bug == "wrong_items_after_resume" and final and bug_step is not None:
            if step >= bug_step:  # the loader resumed one batch behind its saved state
                return positions - self.config.samples_per_step
        if bug == "epoch_restarted_after_resume" and final and bug_step is not None:
            if step >= bug_step:  # the sampler's state was not restored: the epoch anew
                epoch_start = inc.resumed_at - inc.resumed_at % self.config.items
                return epoch_start + positions - inc.resumed_at
        return positions

    # -- helpers ------------------------------------------------------------------------
    def _allocate(
        self,
        inc: _Incarnation,
        step: int,
        attempt: int,
        n: int,
        samples: IntRuns | tuple[()],
        *,
        logged: bool = True,
    ) -> AllocationArcs:
        alloc = inc.ring.allocate(n)
        if not logged:
            return alloc  # handed out, never durable: the allocation-lost bug
        self.max_counter = max(self.max_counter, alloc.counter_after)
        self._log(
            inc.driver,
            WitnessAllocated(
                step=step,
                attempt=attempt,
                num_ids=n,
                counter_after=alloc.counter_after,
                witness_ids=alloc.witness_ids,
                sample_indices=samples if isinstance(samples, IntRuns) else IntRuns(),
                stale_ids=alloc.stale_ids,
            ),
        )
        return alloc

    def _hashes(self, step: int, rank: int) -> dict[str, str]:
        """What rank ``rank`` of every cell holds after ``step``: equal across cells."""
        return {t: _digest(f"{self.config.seed}:{step}:{rank}:{t}") for t in TENSORS}

    def _log(self, writer: EventWriter, event: object) -> int:
        self.events += 1
        return writer.log(event)  # type: ignore[arg-type]


def _manifest(step: int, cell: int, rank: int, *, frozen: bool) -> ParameterManifest:
    """What a rank trains: every parameter of :data:`PARAMETERS`, the head frozen or not."""
    names = [n for n, _ in PARAMETERS]
    trained = [not (frozen and n.startswith("head.")) for n in names]
    return ParameterManifest(
        step=step,
        attempt=0,
        cell=cell,
        rank=rank,
        digest=_digest(repr((names, trained))),
        names=names,
        shapes=[shape for _, shape in PARAMETERS],
        dtypes=["float32"] * len(names),
        requires_grad=trained,
        groups=[0 if t else -1 for t in trained],
    )


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _lose(flush: Path) -> None:
    """Remove the segment a flush sealed at ``flush`` and any merged segment that rolled it
    (while a roll's originals are still there, removing the merged one alone loses nothing)."""
    first = int(flush.stem)
    for path in flush.parent.iterdir():
        seqs = segment_range(path.name) if path.name.endswith(SEGMENT_SUFFIX) else None
        held = seqs is not None and seqs[1] is not None and seqs[0] <= first <= seqs[1]
        if path == flush or held:
            path.unlink()


def synthesize(
    run_dir: str | os.PathLike[str],
    config: SynthConfig,
    *,
    after_step: Callable[[int], None] | None = None,
) -> SynthResult:
    """Write the run ``config`` describes into ``run_dir`` (which must not hold a run).

    ``after_step(step)`` is called after each step's events were logged (and flushed, when
    the step ends a flush interval): a follower of the live run can poll it there.
    """
    config.check()
    root = Path(run_dir)
    if is_run(root):
        raise UsageError(f"{root} already holds a run; synth writes only into a new directory")
    started = time.perf_counter()
    the_plan = plan(config)
    bug = get_bug(config.bug) if config.bug else None
    gen = _Generator(
        config,
        root,
        the_plan,
        bug,
        WriterOptions(
            fsync=config.fsync, flush_interval_s=3600.0, roll_segments=config.roll_segments
        ),
        dataset=SynthDataset(config.items, config.seed) if config.fingerprints else None,
    )
    crashes = dict(the_plan.crashes)
    every = the_plan.checkpoint_every
    inc = gen.start(None, None)
    incarnations = 1
    step = 0
    since_flush = 0
    while step < config.steps:
        skip = bug is not None and bug.name == "skipped_step" and step == the_plan.bug_step
        if not skip:
            gen.step(inc, step)
        since_flush += 1
        if (step + 1) % every == 0:
            gen.checkpoint(inc, step)
            since_flush = 0
        elif since_flush >= config.flush_every:
            inc.log.flush()
            since_flush = 0
        if after_step is not None:
            after_step(step)
        if step in crashes:
            resume_at = crashes.pop(step)
            inc.log.close()  # the job dies: what it flushed stays, it logs no finish
            ref = (
                CheckpointRef(iteration=resume_at, incarnation=inc.log.incarnation)
                if resume_at >= 0
                else None
            )
            if ref is not None:  # the newest complete save of that iteration
                ref = CheckpointRef(
                    iteration=resume_at,
                    incarnation=max(k for it, k in gen.saved if it == resume_at),
                )
            inc = gen.start(ref, inc)
            incarnations += 1
            step = resume_at + 1
            since_flush = 0
            continue
        step += 1
    inc.log.finish(RunStatus.COMPLETED)
    gen.events += 1
    if gen.lost_segment is not None:
        _lose(gen.lost_segment)
    return SynthResult(
        run_dir=root,
        config=config,
        incarnations=incarnations,
        events=gen.events,
        seconds=time.perf_counter() - started,
        bug=bug,
        bug_step=the_plan.bug_step,
        retried_steps=tuple(sorted(the_plan.retried)),
        crashes=the_plan.crashes,
    )
