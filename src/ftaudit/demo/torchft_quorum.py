"""The demo's membership on torchft: a ``LighthouseServer`` in the driver, a ``Manager`` per cell.

Each cell of ``ftaudit demo`` is a torchft replica group of one rank.
Its Manager joins the lighthouse's quorum at the start of every attempt
(``start_quorum``, synchronous, so a replica that is behind heals before its forward);
a replacement cell starts at torchft step 0 and heals from a peer at the newest step
through torchft's own checkpoint transport, calling the cell's registered
``load_state_dict``. Gradients and the commit vote go through ``Manager.allreduce`` (SUM)
and the cell steps only if ``should_commit()`` agrees. The driver neither forms quorums
nor moves state; it allocates witness ids, watches heartbeats, kills a hung cell and
starts replacements.

Read from torchft 0.2.0 as installed (``torchft/manager.py``: ``start_quorum``,
``allreduce``, ``report_error``, ``should_commit``, ``state_dict``; the lighthouse's
quorum rules in ``src/lighthouse.rs``: a quorum waits for every heartbeating replica up
to ``join_timeout_ms``, and a replica counts as alive until ``heartbeat_timeout_ms``
passed without a heartbeat). Upstream: meta-pytorch/torchft ``torchft/manager.py`` at
000c1760ff5727123243c0cb3f7151360b4a6112 (``should_commit`` votes within one replica
group, "different replica groups may return different values"; ``load_state_dict`` sets
only the step and ``batches_committed``; a replica heals when its step is behind the
quorum's newest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
from torch.distributed import ReduceOp, TCPStore
from torchft import Manager, ProcessGroupGloo
from torchft.coordination import LighthouseServer

from ftaudit.errors import DiscardVote
from ftaudit.trainer_hooks.torch import TrainerHooks
from ftaudit.trainer_hooks.torchft import TorchftHooks

HEARTBEAT_TIMEOUT_MS = 5_000
"""A cell without a heartbeat for this long leaves the quorum (torchft's default). The
survivors of a killed cell wait this long at their next quorum; shorter would drop live
cells whose heartbeat thread a loaded machine delays, and split the cells into two
quorums training the same step."""
JOIN_TIMEOUT_MS = 120_000
"""How long a quorum waits for a cell that heartbeats but has not asked to join. Only a
slow cell makes it wait (dead cells stop heartbeating, spares have no Manager yet), and
issuing the quorum without a live cell would let it form a quorum of its own. It ends no
quorum in error: when it passes, the lighthouse issues the quorum without the straggler,
which joins the next one (:meth:`DemoDriver._form_quorum`). With two cells it never
passes: one asking cell of two heartbeating is not a majority, so the lighthouse waits for
the other without limit (``quorum_compute`` in ``src/lighthouse.rs``, meta-pytorch/torchft
at 7eb7087885f7ffaf51148a9df3289d73b8709fbd)."""


def quorum_deadline(collective_timeout_s: float) -> timedelta:
    """The one deadline on a cell's quorum (the Manager's ``quorum_timeout``).

    It is the deadline of the cell's quorum call and of its Manager's call to the
    lighthouse (``ManagerClient._quorum`` in ``src/lib.rs`` and ``_quorum_with_retries`` in
    ``src/manager.rs``, torchft at the commit above); when it passes, torchft raises
    ``TimeoutError: status: Cancelled, message: "Timeout expired"`` and the Manager keeps
    that failure (the next ``start_quorum`` raises it again), so the driver replaces the
    cell. It outlasts every wait the lighthouse ends by itself (a dead cell leaves after
    the heartbeat timeout, a straggler after the join timeout) by a collective timeout,
    so a quorum of slow but live cells forms before it; only a quorum the lighthouse
    does not answer at all, or a two-cell quorum whose peer does not ask for that long,
    reaches it.
    """
    return timedelta(milliseconds=JOIN_TIMEOUT_MS + HEARTBEAT_TIMEOUT_MS) + timedelta(
        seconds=collective_timeout_s
    )


def start_lighthouse() -> LighthouseServer:
    """The job's lighthouse: any number of cells makes a quorum (``min_replicas=1``), as the
    demo's retry runs on the survivors."""
    return LighthouseServer(
        bind="[::]:0",
        min_replicas=1,
        join_timeout_ms=JOIN_TIMEOUT_MS,
        heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
    )


@dataclass(frozen=True)
class Quorum:
    """This cell's place in the quorum of one attempt."""

    rank: int
    size: int
    quorum_id: int
    healed_from: int | None
    """The cell whose state this cell received in this quorum (None: no heal)."""


class TorchftReplica:
    """One cell's torchft Manager (a replica group of world size 1) and ftaudit's view of it."""

    def __init__(self, manager: Manager, ft: TorchftHooks, store: TCPStore) -> None:
        self.manager = manager
        self.ft = ft
        self._store = store  # the group's store: the Manager and its quorum's PG use it

    @classmethod
    def start(
        cls,
        *,
        cell: int,
        lighthouse: str,
        hooks: TrainerHooks,
        state_dict: Callable[[], dict[str, Any]],
        load_state_dict: Callable[[dict[str, Any]], None],
        timeout_s: float,
    ) -> TorchftReplica:
        """Build the Manager of ``cell``: it heartbeats to ``lighthouse`` from now on."""
        store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        timeout = timedelta(seconds=timeout_s)
        manager = Manager(
            pg=ProcessGroupGloo(timeout=timeout),
            load_state_dict=load_state_dict,
            state_dict=state_dict,
            min_replica_size=1,
            use_async_quorum=False,  # heal before the forward: the cell trains its own shard
            timeout=timeout,
            quorum_timeout=quorum_deadline(timeout_s),
            rank=0,
            world_size=1,
            store_addr="127.0.0.1",
            store_port=store.port,
            lighthouse_addr=lighthouse,
            replica_id=str(cell),
            init_sync=False,  # every cell starts from the same seed: no heal at step 0
        )
        # registered after the cell's state function: the heal checksums see all of it
        ft = TorchftHooks.attach(manager, hooks, replica_id=str(cell))
        return cls(manager, ft, store)

    def start_quorum(self, deadline: timedelta | None = None) -> Quorum:
        """Join the quorum of the next attempt; heal here if this cell is behind.

        ``deadline`` replaces the Manager's quorum deadline for this quorum only. A quorum
        that fails (its deadline passed) raises here, and the Manager stays failed.
        """
        self.ft.healed_from = None
        self.manager.start_quorum(timeout=deadline)
        rank = self.manager.participating_rank()
        if rank is None:
            raise RuntimeError("torchft left this cell out of the quorum it joined")
        size = self.manager.num_participants()
        quorum_id = self.ft.quorum_id if self.ft.quorum_id is not None else -1
        return Quorum(rank, size, quorum_id, self.ft.healed_from)

    def allreduce_sum(self, flat: torch.Tensor) -> bool:
        """SUM ``flat`` over the quorum in place; False if the exchange failed (a peer
        died): torchft then refuses the commit."""
        self.manager.allreduce(flat, reduce_op=ReduceOp.SUM).wait()
        return self.manager.errored() is None

    def commit(self, agreed: bool) -> bool:
        """torchft's verdict on the attempt (``should_commit``, called once per attempt):
        a cell that does not agree reports it first, so torchft's step stays."""
        if not agreed:
            self.manager.report_error(DiscardVote("the cells did not all vote to commit"))
        return self.manager.should_commit()

    def state(self) -> dict[str, int]:
        """torchft's own state (its step), saved with every checkpoint."""
        return self.manager.state_dict()

    def restore(self, state: dict[str, int]) -> None:
        self.manager.load_state_dict(state)

    def close(self) -> None:
        self.ft.close()
        self.manager.shutdown(wait=False)
