"""One cell: a Ray actor holding a full replica, its own torch.distributed world of one rank.

Each cell is a torchft replica group of one rank: its own torchft ``Manager``
(:mod:`ftaudit.demo.torchft_quorum`) joins the lighthouse's quorum at each attempt and
heals there when the cell is behind. Cells exchange gradients with a ``Manager.allreduce``
SUM across the quorum. The commit vote rides in the same all-reduce: each cell adds 1
when its gradient is finite, so every survivor of the exchange sees the same sum and
makes the same decision; ``should_commit()`` has the last word.

The training thread beats a heartbeat at each phase; the actor is threaded so that the
driver can read the heartbeat while a step runs and tell a hung cell (no progress, not
waiting in a collective) from one legitimately waiting for its peers.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist

from ftaudit.demo import bugs
from ftaudit.demo.config import DemoConfig
from ftaudit.demo.data import Dataset
from ftaudit.demo.model import TinyLM, policy_loss, token_logprobs
from ftaudit.demo.schedule import DemoSchedule
from ftaudit.demo.shards import shard_slice
from ftaudit.demo.torchft_quorum import Quorum, TorchftReplica
from ftaudit.eventlog.events import CheckpointRef, ChecksumWhen, RankOutcome
from ftaudit.eventlog.rundir import writer_dir
from ftaudit.eventlog.writer import WriterOptions
from ftaudit.trainer_hooks.torch import TrainerHooks, install_witnesses, sample_token_ids

FAULT_QUORUM_DEADLINE = timedelta(seconds=1)
"""The quorum deadline of a cell whose quorum the schedule makes time out: its peers do
not ask before it passed, so its length changes only how soon the fault fires."""
NORMAL = RankOutcome.NORMAL.value
DISCARDED = RankOutcome.DISCARDED_SHOULD_RETRY.value


class Heartbeat:
    """Progress of the training thread, read by the driver through another actor thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._waiting = False

    def beat(self, *, waiting: bool = False) -> None:
        with self._lock:
            self._last = time.monotonic()
            self._waiting = waiting

    def read(self) -> tuple[float, bool]:
        """Seconds since the last beat, and whether the thread waits in a collective."""
        with self._lock:
            return time.monotonic() - self._last, self._waiting


class CellWorker:
    """The replica of one cell and its training step; wrapped as a Ray actor by :data:`Cell`."""

    def __init__(self, config_json: str, incarnation: int) -> None:
        """Build the replica; the cell it serves is given later by :meth:`join`.

        Starting a process and importing torch takes seconds, so the driver keeps a warm
        spare built this way and hands it a cell index only when a cell must be replaced.
        """
        torch.set_num_threads(1)
        self.cfg = DemoConfig.from_json(config_json)
        self.incarnation = incarnation
        self.schedule = DemoSchedule.parse(self.cfg.faults_json)
        self.dataset = Dataset(
            self.cfg.data, self.cfg.model.vocab_size, self.cfg.seed, self.cfg.objective
        )
        torch.manual_seed(self.cfg.seed)  # every cell starts from the same weights
        self.model = TinyLM(self.cfg.model, self.cfg.data.seq_len)
        install_witnesses(self.model, self.cfg.buffer_size, layers="layers")
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr)
        self.scheduler = warmup(self.optimizer)
        # the cell's own torch.distributed world: one rank, so the in-cell DP all-reduce
        # is the identity, but the code path is the one a multi-rank cell runs
        if not dist.is_initialized():
            dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        self.quorum_rank = 0
        self.quorum_size = 1
        self.heartbeat = Heartbeat()
        self.cell = -1
        self.data_rank: int | None = None
        """Set only by the ``healed_cell_reads_peer_shard`` defect: the shard it reads."""
        self._hooks: TrainerHooks | None = None
        self.replica: TorchftReplica | None = None
        """The cell's torchft Manager, started by :meth:`join`."""
        self._quorum_released = threading.Event()
        self._held: set[tuple[int, int]] = set()
        """The attempts at which this cell held its ask for a peer's quorum timeout."""

    def join(self, cell: int, lighthouse: str) -> int:
        """Serve as ``cell``: attach the hooks (its event writer) to the run and start its
        torchft Manager, heartbeating to ``lighthouse``. Returns the pid."""
        if self._hooks is not None:
            raise RuntimeError(f"this worker already serves cell {self.cell}")
        self.cell = cell
        self._hooks = TrainerHooks.attach(
            self.cfg.run_dir,
            self.incarnation,
            cell=cell,
            rank=0,
            model=self.model,
            optimizer=self.optimizer,
            faults=self.schedule.process_faults(),
            options=WriterOptions(flush_interval_s=1.0),
            stateful={"lr_scheduler": self.scheduler},
        )
        self.replica = TorchftReplica.start(
            cell=cell,
            lighthouse=lighthouse,
            hooks=self._hooks,
            state_dict=self._heal_state,
            load_state_dict=self._take_state,
            timeout_s=self.cfg.collective_timeout_s,
        )
        return os.getpid()

    @property
    def hooks(self) -> TrainerHooks:
        if self._hooks is None:
            raise RuntimeError("the worker has not joined a cell yet")
        return self._hooks

    @property
    def manager(self) -> TorchftReplica:
        if self.replica is None:
            raise RuntimeError("the worker has not joined a cell yet")
        return self.replica

    # -- membership --------------------------------------------------------------------

    def join_quorum(self, step: int, attempt: int) -> Quorum:
        """Join the torchft quorum of ``step``/``attempt``, healing from a peer first if this
        cell is behind. Raises if torchft's quorum fails: the driver replaces the cell."""
        self.heartbeat.beat(waiting=True)
        when = {"step": step, "attempt": attempt, "cell": self.cell}
        deadline = None
        if self.schedule.quorum_times_out(**when, incarnation=self.incarnation):
            deadline = FAULT_QUORUM_DEADLINE  # expires: the peers hold their asks
        elif (step, attempt) not in self._held and self.schedule.holds_quorum(
            **when, incarnation=self.incarnation
        ):
            self._held.add((step, attempt))  # a re-ask in the same attempt is not held
            self._quorum_released.wait()  # set by the driver once the peer's quorum failed
            self._quorum_released.clear()
        quorum = self.manager.start_quorum(deadline)
        self.quorum_rank, self.quorum_size = quorum.rank, quorum.size
        self.heartbeat.beat()
        return quorum

    def release_quorum(self) -> None:
        """Let a held ask go (see :meth:`DemoSchedule.holds_quorum`)."""
        self._quorum_released.set()

    def read_heartbeat(self) -> tuple[float, bool]:
        return self.heartbeat.read()

    # -- one attempt -------------------------------------------------------------------

    def train_step(
        self,
        step: int,
        attempt: int,
        sample_indices: list[int],
        items: list[int],
        witness_ids: list[int],
        stale_ids: list[int],
    ) -> dict[str, Any]:
        """Train this cell's shard of the global batch; commit only if every cell can.

        ``items[k]`` is the dataset item the loader read for ``sample_indices[k]``.
        Returns ``{"outcome": normal|discarded_should_retry, "loss": ..., ...}``.
        """
        hooks, bug = self.hooks, self.cfg.bug
        with hooks.step(step, attempt):
            self.heartbeat.beat()
            group = self.cfg.data.samples_per_prompt
            rank = 0 if bugs.active(bug, "wrong_shard") else self.quorum_rank
            part = shard_slice(len(sample_indices), group, rank, self.quorum_size)
            if bugs.active(bug, "duplicated_item_across_shards"):
                # the shard's end taken inclusively: the first group of the next shard too
                part = slice(part.start, min(part.stop + group, len(sample_indices)))
            read = part  # the items this cell reads: its own shard's
            if self.data_rank is not None:  # a data cursor adopted from a peer at a heal
                # wrapped: the peer sends it from the quorum before the one
                # the cells train in, which may have had more cells
                cursor = self.data_rank % self.quorum_size
                read = shard_slice(len(sample_indices), group, cursor, self.quorum_size)
            batch = self.dataset.batch(
                np.asarray(sample_indices)[part],
                np.asarray(witness_ids)[part],
                items=np.asarray(items)[read],
            )
            tokens = torch.from_numpy(batch.tokens)
            hooks.log_fingerprints(batch.sample_indices, tokens)  # what the model receives
            inputs, targets = tokens[:, :-1], tokens[:, 1:]
            if not (bugs.active(bug, "zero_grad_skipped") and step % 2 == 1):
                self.optimizer.zero_grad(set_to_none=False)
            with hooks.batch(sample_token_ids(batch.witness_ids, inputs.shape[1])):
                logits = self.model(inputs)
                loss = policy_loss(
                    token_logprobs(logits, targets),
                    torch.from_numpy(batch.loss_mask),
                    torch.from_numpy(batch.advantages).float(),
                    len(sample_indices),
                )
                if self.schedule.discards_now(
                    step=step, attempt=attempt, cell=self.cell, incarnation=self.incarnation
                ):
                    loss = loss * float("nan")  # a bad rollout: this cell must not commit
                loss.backward()
            hooks.log_sample_advantages(  # policy_loss scales every term by the advantage
                batch.witness_ids, batch.token_counts, batch.all_zero, pure_advantage_loss=True
            )
            self.heartbeat.beat()
            hooks.maybe_fault("before_allreduce")
            committed = self._exchange_and_vote(finite=bool(torch.isfinite(loss.detach())))
            if committed:
                hooks.before_optimizer_step()  # the exchanged gradient: this attempt's ids only
                self.optimizer.step()
                if bugs.active(bug, "optimizer_stepped_twice"):
                    self.optimizer.step()  # a second, misplaced accumulation-boundary step
                self.scheduler.step()
                self._after_commit(stale_ids)
            else:  # the retry's ids start from cleared rows, however often it is retried
                hooks.after_discard(stale_ids, flush=False)
            hooks.log_metrics(
                {
                    "loss": float(loss.detach()),
                    "samples": float(len(batch.sample_indices)),
                    "reward_mean": float(np.mean(batch.rewards)),
                }
            )
            hooks.flush()
            hooks.maybe_fault("after_commit")
            hooks.maybe_fault("after_step")
            self.heartbeat.beat()
            return {"outcome": NORMAL if committed else DISCARDED, "loss": float(loss.detach())}

    def _exchange_and_vote(self, *, finite: bool) -> bool:
        """All-reduce SUM of [gradients..., vote] in the cell, then across cells.

        A cell with a non-finite gradient contributes zeros and a vote of 0, so the
        survivors' sum stays usable for diagnosis and nobody commits. A failed collective
        (a peer died) means this cell cannot know the others' decision: discard.
        """
        params = [p for p in self.model.parameters() if p.grad is not None]
        flat = torch.cat([p.grad.reshape(-1) for p in params] + [torch.ones(1)])
        if not finite:
            flat.zero_()
        dist.all_reduce(flat)  # the in-cell data-parallel reduction (world of one rank)
        self.heartbeat.beat(waiting=True)
        exchanged = self.manager.allreduce_sum(flat)
        self.heartbeat.beat()
        votes = round(float(flat[-1])) if exchanged else 0
        # its own bad gradient is never committed, whatever the others say
        agreed = exchanged and finite
        if votes != self.quorum_size and not bugs.active(
            self.cfg.bug, "commit_despite_peer_discard"
        ):
            agreed = False
        agreed = self.manager.commit(agreed)  # torchft's should_commit has the last word
        if not agreed:
            return False
        offset = 0
        for p in params:
            n = p.grad.numel()
            p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
            offset += n
        return True

    def _after_commit(self, stale_ids: list[int]) -> None:
        """Snapshot and clear the witness, as the hooks do; the bugs tamper with this here."""
        bug = self.cfg.bug
        if bugs.active(bug, "stale_rows_not_cleared"):
            stale_ids = []
        offloaded = None
        if bugs.active(bug, "adam_moments_not_cleared"):
            offloaded = self._witness_moments()
        self.hooks.after_optimizer_step(stale_ids, checksum=True, flush=False)
        if offloaded is not None:
            with torch.no_grad():  # the "offloaded" optimizer state comes back over the clear
                for tensor, saved in offloaded:
                    tensor.copy_(saved)

    def _witness_moments(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        out = []
        for witness in self.hooks.witnesses.instances().values():
            for value in self.optimizer.state.get(witness.weight, {}).values():
                if isinstance(value, torch.Tensor) and value.shape == witness.weight.shape:
                    out.append((value, value.detach().clone()))
        return out

    # -- checkpoints and heals ---------------------------------------------------------

    def save(self, path: str, iteration: int, attempt: int, extra: dict[str, Any]) -> None:
        """Write the checkpoint file (the cell asked to) and log this cell's snapshot."""
        extra = {**extra, "torchft": self.manager.state()}  # torchft's step, as it asks
        with self.hooks.step(iteration, attempt):
            self.hooks.save_checkpoint(path, iteration, extra)
            if bugs.active(self.cfg.bug, "segment_lost"):
                self._cleanup_after_checkpoint()

    def _cleanup_after_checkpoint(self) -> None:
        """The defect of ``segment_lost``: a too-broad cleanup takes a sealed log segment."""
        folder = writer_dir(self.cfg.run_dir, self.hooks.writer.writer_id)
        sealed = sorted(folder.glob("*.parquet"))
        if len(sealed) >= 2:
            sealed[-2].unlink()

    def log_at_save(self, iteration: int, attempt: int) -> None:
        """A cell that did not write the file still records what it held at the save."""
        with self.hooks.step(iteration, attempt):
            self.hooks.log_checksums(
                ChecksumWhen.AT_SAVE,
                checkpoint=CheckpointRef(iteration=iteration, incarnation=self.incarnation),
            )
            self.hooks.run.record_checkpoint(iteration, source=self.hooks.identity)

    def load(
        self, path: str, iteration: int, saved_by: int, resume_stale_ids: list[int]
    ) -> dict[str, Any]:
        """Resume: load the checkpoint, log what was loaded, zero the resume stale slots."""
        with self.hooks.step(iteration, 0):
            meta = self.hooks.load_checkpoint(
                path,
                checkpoint=CheckpointRef(iteration=iteration, incarnation=saved_by),
                resume_stale_ids=resume_stale_ids,
            )
            self.hooks.flush()
        self.restore_manager(meta["extra"]["torchft"])
        if bugs.active(self.cfg.bug, "head_frozen_after_resume"):
            self.model.head.requires_grad_(False)  # a fine-tuning flag applied on resume
        return meta

    def restore_manager(self, state: dict[str, int]) -> None:
        """Put torchft's Manager at the saved step: it heals this cell only if a peer is
        ahead of it."""
        self.manager.restore(state)

    def _heal_state(self) -> dict[str, Any]:
        """What a healed peer receives: the Manager's ``state_dict`` function, called in
        the quorum, before the healed cell's next forward."""
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "data_rank": self.quorum_rank,
        }
        if not bugs.active(self.cfg.bug, "heal_without_scheduler"):
            state["lr_scheduler"] = self.scheduler.state_dict()
        return state

    def _take_state(self, state: dict[str, Any]) -> None:
        """Load a peer's state: the Manager's ``load_state_dict`` function (the hooks' heal
        function, registered after it, then logs the ``after_heal`` checksums)."""
        self.model.load_state_dict(state["model"])
        if not bugs.active(self.cfg.bug, "healed_cell_differs"):
            self.optimizer.load_state_dict(state["optimizer"])
        if bugs.active(self.cfg.bug, "healed_cell_reads_peer_shard"):
            # the defect: the data cursor is "restored" with the rest of the peer's state,
            # so this cell reads the peer's shard while its ids stay its own
            self.data_rank = state["data_rank"]
        if "lr_scheduler" in state:
            self.scheduler.load_state_dict(state["lr_scheduler"])

    def close(self) -> None:
        self.manager.close()
        self.hooks.close()


def warmup(
    optimizer: torch.optim.Optimizer, steps: int = 4
) -> torch.optim.lr_scheduler.LRScheduler:
    """A linear learning-rate warmup over ``steps`` committed steps, then constant."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / steps))


Cell = ray.remote(num_cpus=0, max_concurrency=2, max_restarts=0)(CellWorker)
"""The Ray actor: threaded (two calls at once) so heartbeats answer during a step."""
