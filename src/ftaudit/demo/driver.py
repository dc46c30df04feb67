"""The training job's driver: one incarnation of the run, from start or resume to the end.

It owns the hooks' :class:`DriverSession` (allocator, acceptance policy, step ends), the
torchft ``LighthouseServer`` the cells' Managers form their quorums through, and the
cells (Ray actors) and their liveness: a dead or hung cell leaves the quorum (the retry
runs without it), and a replacement is started at the next step; its torchft Manager
heals it from a live peer in its first quorum. The driver neither forms quorums nor
moves state: torchft does.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayTaskError

from ftaudit.dataset import build_manifest
from ftaudit.demo import bugs
from ftaudit.demo.cell import Cell
from ftaudit.demo.config import DemoConfig
from ftaudit.demo.data import Dataset
from ftaudit.demo.loader import DemoLoader
from ftaudit.demo.schedule import DemoSchedule
from ftaudit.demo.talk import say
from ftaudit.demo.torchft_quorum import HEARTBEAT_TIMEOUT_MS, Quorum, start_lighthouse
from ftaudit.errors import EveryCellLost
from ftaudit.eventlog.events import (
    CellOutcome,
    CheckpointRef,
    LoaderState,
    LoaderWhen,
    RankOutcome,
    WitnessAllocated,
)
from ftaudit.eventlog.resume import ResumeIndex
from ftaudit.trainer_hooks import DriverSession, FaultInjector, WitnessIdAllocator, WitnessInfo
from ftaudit.trainer_hooks.allocator import witness_allocated_event
from ftaudit.trainer_hooks.driver import errored, ranks

POLL_S = 0.1
LOSE_DEADLINE_S = 300.0
"""How long a killed cell may take to be gone (seconds, a few in practice): a bound for a
hang of Ray's kill, not a speed."""
QUORUM_ROUNDS = 10
"""How many times the cells may ask for a quorum of all of them before the step
gives up (one or two in practice: see :meth:`DemoDriver._form_quorum`)."""


def checkpoint_dir(run_dir: str, iteration: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"iter_{iteration:06d}"


class DemoDriver:
    """Runs steps ``first_step .. cfg.steps - 1`` of one incarnation."""

    def __init__(self, cfg: DemoConfig) -> None:
        self.cfg = cfg
        self.schedule = DemoSchedule.parse(cfg.faults_json)
        self.dataset = Dataset(cfg.data, cfg.model.vocab_size, cfg.seed, cfg.objective)
        index = ResumeIndex.open(cfg.run_dir)  # the run's log, read once for this resume
        latest = index.latest_checkpoint()
        self.resume = latest.ref if latest is not None else None
        self.session = DriverSession.start(
            cfg.run_dir,
            buffer_size=cfg.buffer_size,
            resume_from=self.resume,
            config=json.loads(cfg.to_json()),
            dataset_size=self.dataset.size,
            deterministic_order=True,
            index=index,
        )
        self.incarnation = self.session.incarnation
        self.faults = FaultInjector(
            self.schedule.process_faults(), self.session.writer, target="driver"
        )
        self.lighthouse = start_lighthouse()
        """torchft's quorum service: the cells' Managers join it."""
        self.cells: dict[int, Any] = {}
        """The alive cells' actor handles, by cell index."""
        self.spares: list[Any] = []
        """Warm workers (process started, torch imported) waiting to replace a dead cell."""
        self.keep_spare = any(
            f.target == "trainer" and f.incarnation in (None, self.incarnation)
            for f in self.schedule.faults
        ) or any(q.incarnation == self.incarnation for q in self.schedule.quorum_timeouts)
        """Only an incarnation where cells are scheduled to fail pays for a spare."""
        self.data_offset = 0
        """Where the stream's sample indices stand against ``step * samples_per_step`` (a
        consumed-samples counter, saved with each checkpoint)."""
        self._saved: tuple[dict[str, Any], int] | None = None
        """The last checkpoint's loader state and consumed samples (None: none yet)."""
        data = cfg.data
        self.loader = DemoLoader(
            self.dataset.size, data.samples_per_prompt, data.samples_per_step, cfg.seed
        )
        self._batch: tuple[int, np.ndarray] | None = None
        """The step whose items the loader handed out last, and those items (for retries)."""
        self._declared: set[int] = set()
        """The epochs whose order this incarnation declared to the run."""
        self.session.declare_manifest(build_manifest(self.dataset, description="ftaudit demo"))
        self.pending_allocation: WitnessAllocated | None = None
        self.tag = f"[incarnation {self.incarnation}]"

    # -- membership --------------------------------------------------------------------

    def _warm_spare(self) -> None:
        """Start a spare worker in the background (its start overlaps training)."""
        self.spares.append(Cell.remote(self.cfg.to_json(), self.incarnation))

    def _start(self, cells: list[int]) -> dict[int, Any]:
        """Workers serving ``cells`` (warm spares first), ready when this returns."""
        handles = {
            c: self.spares.pop(0)
            if self.spares
            else Cell.remote(self.cfg.to_json(), self.incarnation)
            for c in cells
        }
        lighthouse = self.lighthouse.address()
        ray.get([h.join.remote(c, lighthouse) for c, h in handles.items()])
        if self.keep_spare:
            self._warm_spare()
        return handles

    def _replace_missing(self, step: int) -> None:
        """Start a replacement for every dead cell; its torchft Manager heals it from a
        live peer in its first quorum (:meth:`_form_quorum`)."""
        missing = [c for c in range(self.cfg.cells) if c not in self.cells]
        if missing:
            self.cells.update(self._start(missing))
            if bugs.active(self.cfg.bug, "data_rewound_on_heal") and self._saved is not None:
                # the defect: the membership change is handled like a restart, though the
                # live cells keep their weights (a heal rolls nothing back)
                state, consumed = self._saved
                self.loader.load_state_dict(state)
                self.data_offset = consumed - step * self.cfg.data.samples_per_step

    # -- one attempt -------------------------------------------------------------------

    def _items(self, step: int) -> np.ndarray:
        """The items the loader reads for ``step`` (once per step: a retry reuses them)."""
        if self._batch is None or self._batch[0] != step:
            positions, items = self.loader.next_batch()
            for epoch in np.unique(positions // self.dataset.size).tolist():
                if epoch not in self._declared:
                    self.session.log_data(self.loader.data_order(epoch))
                    self._declared.add(epoch)
            self._batch = (step, items)
        return self._batch[1]

    def _run_attempt(self, step: int, attempt: int) -> dict[int, CellOutcome]:
        self._form_quorum(step, attempt)
        samples = self.dataset.step_samples(step, self.data_offset)
        items = self._items(step)
        if bugs.active(self.cfg.bug, "allocation_not_durable"):
            info = self._allocate_logged_later(step, attempt, samples)
        else:
            info = self.session.allocate(step, attempt, samples)
        refs = {
            c: m.train_step.remote(
                step, attempt, samples.tolist(), items.tolist(), info.witness_ids, info.stale_ids
            )
            for c, m in self.cells.items()
        }
        results = self._collect(step, refs)
        return {
            c: errored() if r is None else ranks(RankOutcome(r["outcome"]))
            for c, r in sorted(results.items())
        }

    def _form_quorum(self, step: int, attempt: int) -> None:
        """Every live cell joins one torchft quorum before the attempt trains.

        The lighthouse issues a quorum at once when every member of the previous one asked
        again ("fast quorum"), so a replacement that asks a moment later is left for the
        next quorum and waits there. Cells whose quorum left out a live cell therefore
        ask again until one quorum holds every live cell; a replacement heals from a peer
        at the newest step inside it. A cell whose quorum failed is lost (:meth:`_lose`):
        the attempt goes on without it and a replacement heals at the next step.
        """
        pending = {c: m.join_quorum.remote(step, attempt) for c, m in self.cells.items()}
        joined: dict[int, Quorum] = {}
        for _ in range(QUORUM_ROUNDS):
            while pending:
                ready, _ = ray.wait(list(pending.values()), num_returns=1)
                for c, ref in [(c, r) for c, r in pending.items() if r in ready]:
                    del pending[c]
                    try:
                        joined[c] = ray.get(ref)
                        continue
                    except RayActorError:
                        say(f"{self.tag} step {step}: cell {c} died joining the quorum")
                    except RayTaskError as exc:
                        say(
                            f"{self.tag} step {step}: cell {c} lost: its torchft quorum "
                            f"failed ({_first_line(exc.cause)}); replacing it"
                        )
                        self._lose(c)
                    del self.cells[c]
                    if any(self._holds(step, attempt, h) for h in pending):
                        self._release_held(pending)
                if not self.cells:
                    raise EveryCellLost(f"step {step}: every cell died or was lost")
                # a quorum without a cell still waiting: its members ask again, so the
                # next quorum takes the latecomer in
                for c in [c for c, q in joined.items() if pending and q.size < len(self.cells)]:
                    pending[c] = self.cells[c].join_quorum.remote(step, attempt)
                    del joined[c]
            ids = {q.quorum_id for q in joined.values()}
            if len(ids) == 1 and all(q.size == len(self.cells) for q in joined.values()):
                break
            # split: again
            pending = {c: self.cells[c].join_quorum.remote(step, attempt) for c in joined}
            joined = {}
        else:
            raise RuntimeError(f"step {step}: no torchft quorum of all {len(self.cells)} cells")
        for c, q in sorted(joined.items()):
            if q.healed_from is not None:
                say(f"{self.tag} step {step}: healed cell(s) [{c}] from cell {q.healed_from}")

    def _lose(self, cell: int) -> None:
        """Kill a cell whose torchft quorum failed and wait until it is gone.

        A failed quorum stays in its Manager (``start_quorum`` raises it again first:
        torchft 0.2.0 ``torchft/manager.py``), so the cell cannot join another one; it is
        ended as a dead cell is, its log left as a killed cell leaves it, and replaced at
        the next step. Gone means its Manager stopped heartbeating to the lighthouse.
        """
        handle = self.cells[cell]
        ray.kill(handle, no_restart=True)
        deadline = time.monotonic() + LOSE_DEADLINE_S
        while time.monotonic() < deadline:
            try:
                ray.get(handle.read_heartbeat.remote(), timeout=POLL_S * 50)
            except RayActorError:
                return
            except GetTimeoutError:
                continue
            time.sleep(POLL_S)
        raise RuntimeError(f"cell {cell} still answered {LOSE_DEADLINE_S:.0f}s after it was killed")

    def _holds(self, step: int, attempt: int, cell: int) -> bool:
        return self.schedule.holds_quorum(
            step=step, attempt=attempt, cell=cell, incarnation=self.incarnation
        )

    def _release_held(self, pending: dict[int, Any]) -> None:
        """Let the cells holding their asks for a scheduled quorum timeout ask now.

        First the lighthouse forgets the lost cell: its failed ask stays among the
        lighthouse's participants until a quorum is issued, and counts while the cell
        heartbeated within the heartbeat timeout, so an ask made sooner could get a quorum
        naming a dead cell (the attempt would then be discarded and retried).
        """
        time.sleep(HEARTBEAT_TIMEOUT_MS / 1000 + 1)  # the lost cell was gone before this
        ray.get([self.cells[c].release_quorum.remote() for c in pending])

    def _allocate_logged_later(self, step: int, attempt: int, samples: Any) -> WitnessInfo:
        """The defect of ``allocation_not_durable``: ids go out now, the log entry later.

        The allocation event is queued and logged with the attempt's end, one write per
        attempt; a crash in between loses it while the cells' evidence of it is durable.
        """
        info = self.session.allocator.allocate(len(samples))
        self.pending_allocation = witness_allocated_event(
            info,
            samples,
            counter_after=self.session.allocator.counter,
            buffer_size=self.cfg.buffer_size,
            step=step,
            attempt=attempt,
        )
        return info

    def _collect(self, step: int, refs: dict[int, Any]) -> dict[int, dict[str, Any] | None]:
        """Wait for every cell; kill a cell whose training thread stopped making progress."""
        results: dict[int, dict[str, Any] | None] = {}
        pending = dict(refs)
        while pending:
            ready, _ = ray.wait(list(pending.values()), num_returns=len(pending), timeout=POLL_S)
            for c, ref in list(pending.items()):
                if ref in ready:
                    del pending[c]
                    try:
                        results[c] = ray.get(ref)
                    except RayActorError:
                        say(f"{self.tag} step {step}: cell {c} died")
                        results[c] = None
            for c in list(pending):
                if self._hung(c):
                    say(
                        f"{self.tag} step {step}: cell {c} hung (no progress for "
                        f"{self.cfg.heartbeat_timeout_s:.0f}s): killing it"
                    )
                    ray.kill(self.cells[c], no_restart=True)
        for c, r in results.items():
            if r is None:
                del self.cells[c]
        return results

    def _hung(self, cell: int) -> bool:
        try:
            age, waiting = ray.get(self.cells[cell].read_heartbeat.remote(), timeout=5)
        except (RayActorError, GetTimeoutError):
            return False  # dead: its step result will say so
        return not waiting and age > self.cfg.heartbeat_timeout_s

    # -- steps, checkpoints, resume ----------------------------------------------------

    def _start_cells(self) -> None:
        self.cells.update(self._start(list(range(self.cfg.cells))))
        if self.resume is not None:
            self._load(self.resume)

    def _load(self, ref: CheckpointRef) -> None:
        iteration = ref.iteration
        if bugs.active(self.cfg.bug, "restore_older_checkpoint"):
            iteration = max(ref.iteration - self.cfg.checkpoint_every, 0)
        path = checkpoint_dir(self.cfg.run_dir, iteration) / "state.pt"
        loaders = self.cells
        if bugs.active(self.cfg.bug, "restore_skipped_on_peer"):
            loaders = {c: m for c, m in self.cells.items() if c == min(self.cells)}
        metas = ray.get(
            [
                m.load.remote(
                    str(path), ref.iteration, ref.incarnation, self.session.resume_stale_ids
                )
                for m in loaders.values()
            ]
        )
        if bugs.active(self.cfg.bug, "restore_skipped_on_peer"):
            # the defect: the other cells only rejoin torchft at the checkpoint's step;
            # torchft then sees every replica up to date and heals none of them
            torchft_state = metas[0]["extra"]["torchft"]
            others = [m for c, m in self.cells.items() if c not in loaders]
            ray.get([m.restore_manager.remote(torchft_state) for m in others])
        n = self.cfg.data.samples_per_step
        extra = metas[0]["extra"]
        self._restore_loader(extra["loader"], ref)
        self.data_offset = int(extra["consumed"]) - (iteration + 1) * n
        self._saved = (extra["loader"], int(extra["consumed"]))
        if bugs.active(self.cfg.bug, "skip_sample_after_resume"):
            self.data_offset = self.cfg.data.samples_per_prompt  # one group too far
            self.loader.seek(self.loader.position + self.data_offset)
        if bugs.active(self.cfg.bug, "replay_batch_after_resume"):
            self.data_offset = -n  # the checkpoint step's own batch again
            self.loader.seek(self.loader.position + self.data_offset)
        if bugs.active(self.cfg.bug, "allocator_from_checkpoint_counter"):
            allocator = WitnessIdAllocator(self.cfg.buffer_size)
            allocator.resume(int(metas[0]["extra"]["allocator_counter"]))
            self.session.allocator = allocator
        say(
            f"{self.tag} resumed from checkpoint {ref.iteration} "
            f"(saved by incarnation {ref.incarnation})"
        )

    def _restore_loader(self, state: dict[str, Any], ref: CheckpointRef) -> None:
        """Put the loader where the checkpoint left it; log what it holds now."""
        if bugs.active(self.cfg.bug, "shuffle_state_not_restored"):
            # the defect: only the position comes back; the shuffle generator is rebuilt
            # unseeded, as if its state had never been part of the checkpoint
            data = self.cfg.data
            self.loader = DemoLoader(
                self.dataset.size, data.samples_per_prompt, data.samples_per_step, None
            )
            self.loader.seek(int(state["position"]))
        else:
            self.loader.load_state_dict(state)
        self.session.log_data(self._loader_state(ref.iteration, LoaderWhen.RESUMED))

    def _loader_state(self, iteration: int, when: LoaderWhen) -> LoaderState:
        state = self.loader.state_dict()
        return LoaderState(
            iteration=iteration,
            when=when,
            position=int(state["position"]),
            epoch=int(state["epoch"]),
            seed=self.loader.seed,
        )

    def _checkpoint(self, step: int, attempt: int) -> None:
        path = checkpoint_dir(self.cfg.run_dir, step) / "state.pt"
        writer = min(self.cells)
        loader = self.loader.state_dict()
        if bugs.active(self.cfg.bug, "wrong_items_after_resume"):
            # the defect: the state of the prefetching reader is saved, which has already
            # read the next step's items; a resume hands out the batch after it
            loader = {**loader, "position": self.loader.fetched}
        consumed = (step + 1) * self.cfg.data.samples_per_step + self.data_offset
        extra = {
            "allocator_counter": self.session.allocator.counter,
            "loader": loader,
            "consumed": consumed,
        }
        self._saved = (loader, consumed)
        ray.get(
            [
                m.save.remote(str(path), step, attempt, extra)
                if c == writer
                else m.log_at_save.remote(step, attempt)
                for c, m in self.cells.items()
            ]
        )
        self.session.log_data(
            LoaderState(
                iteration=step,
                when=LoaderWhen.SAVED,
                position=int(loader["position"]),
                epoch=int(loader["epoch"]),
                seed=self.loader.seed,
            )
        )
        self.session.record_checkpoint(step, path=str(path))
        say(f"{self.tag} step {step}: checkpoint saved")

    def run(self) -> None:
        first = self.session.first_step
        say(
            f"{self.tag} starting at step {first} with {self.cfg.cells} cells "
            f"(objective {self.cfg.objective}, B={self.cfg.buffer_size})"
        )
        self._start_cells()
        late_checkpoint: tuple[int, int] | None = None
        for step in range(first, self.cfg.steps):
            if step > first:
                self._replace_missing(step)
            attempt = 0
            while True:
                started = time.perf_counter()
                outcomes = self._run_attempt(step, attempt)
                self.faults.maybe_fire(step, attempt, "mid_step")
                if self.pending_allocation is not None:
                    self.session.writer.log(self.pending_allocation)
                    self.pending_allocation = None
                accepted = self.session.end_attempt(step, attempt, outcomes)
                say(
                    f"{self.tag} step {step} attempt {attempt}: "
                    f"{_describe(outcomes)} -> {'accepted' if accepted else 'retry'} "
                    f"({time.perf_counter() - started:.1f}s)"
                )
                if accepted:
                    break
                if not self.cells:
                    raise EveryCellLost(f"step {step}: every cell died or was lost")
                attempt += 1
            if late_checkpoint is not None:
                self._checkpoint(*late_checkpoint)  # holds this step's state: one step late
                late_checkpoint = None
            if (step + 1) % self.cfg.checkpoint_every == 0:
                if bugs.active(self.cfg.bug, "checkpoint_one_step_late"):
                    late_checkpoint = (step, attempt)
                else:
                    self._checkpoint(step, attempt)
        for m in self.cells.values():
            ray.get(m.close.remote())
        self.lighthouse.shutdown()
        self.session.finish()
        say(f"{self.tag} finished {self.cfg.steps} steps")


def _first_line(error: BaseException) -> str:
    """``Type: message`` for a progress line: the first line, without the details and
    metadata that follow the code and message in torchft's gRPC status text."""
    lines = str(error).splitlines()
    text = lines[0].split(", details:")[0] if lines else ""
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _describe(outcomes: dict[int, CellOutcome]) -> str:
    def one(o: CellOutcome) -> str:
        if o.errored:
            return "error"
        discarded = RankOutcome.DISCARDED_SHOULD_RETRY in o.ranks
        return "discarded" if discarded else "normal"

    return ", ".join(f"cell {c} {one(o)}" for c, o in outcomes.items())
