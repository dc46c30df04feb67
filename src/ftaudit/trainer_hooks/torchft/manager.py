"""One replica group rank under a ``torchft.Manager``: outcomes, heals and torchft's records.

- **Outcomes.** :meth:`TorchftHooks.optimizer_step` steps through ``should_commit()``
  (or a ``torchft.optim.OptimizerWrapper``, whose ``step()`` calls it and commits iff the
  Manager's step advanced): a commit is the ``normal`` outcome and the witness snapshot
  and clearing follow; a refused commit is ``discarded_should_retry`` and the attempt's
  stale slots are cleared (``after_discard``), so the retry starts from clean rows.
- **Step and attempt.** The step is ``Manager.current_step()`` (committed steps so far);
  the attempt comes from the driver, because a group that healed cannot count the
  attempts its peers made before it joined. :meth:`TorchftHooks.check_step` refuses a
  driver step that is not the Manager's.
- **Heals.** :meth:`TorchftHooks.attach` registers a state function with the Manager:
  the sending group puts its cell in the state it sends and logs ``after_heal``
  checksums of what it sends (the state at the heal: a source that was itself healed
  earlier in a step would otherwise be compared by what it received then, not by what
  it trained since), and the receiving group, after
  every earlier registered ``load_state_dict`` ran, logs ``after_heal`` checksums naming
  that source cell and a ``CellReconfigured`` with itself as the healed cell (FT006 then
  compares what it loaded with what the source held).
- **Records.** torchft's quorum and commit log records of this rank become
  ``TorchftQuorum`` / ``TorchftCommit`` events; each new quorum also logs a
  ``CellReconfigured`` naming this cell among its alive cells (the alive cells of a
  quorum are the union over the groups' events).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torchft.manager import Manager
from torchft.optim import OptimizerWrapper

from ftaudit.eventlog.context import step_context
from ftaudit.eventlog.events import (
    CellOutcome,
    CellReconfigured,
    ChecksumWhen,
    RankOutcome,
    TorchftCommit,
    TorchftQuorum,
)
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.trainer_hooks.torch.worker import TrainerHooks

QUORUMS_LOGGER = "torchft_quorums"
COMMITS_LOGGER = "torchft_commits"
STATE_KEY = "ftaudit"
"""The key of ftaudit's state function in the Manager's state dict (the source's cell)."""


def any_committed(cells: Mapping[int, CellOutcome]) -> bool:
    """torchft's acceptance: the step moved on if any replica group committed it.

    Groups commit independently (``should_commit`` agrees within a group, not across
    groups); one that did not commit heals from a committed peer at the next quorum.
    Give it to :meth:`ftaudit.trainer_hooks.DriverSession.record_attempt_end`.
    """
    return any(
        not c.errored and c.ranks and all(o is RankOutcome.NORMAL for o in c.ranks)
        for c in cells.values()
    )


class _Records(logging.Handler):
    """torchft's quorum and commit records of one rank, logged as events."""

    def __init__(self, owner: TorchftHooks) -> None:
        super().__init__(logging.INFO)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        fields = record.__dict__
        mine = str(fields.get("replica_id")) == self.owner.replica_id
        if not mine or fields.get("rank") != self.owner.group_rank:
            return  # another replica group's Manager in this process
        try:
            self.owner.on_record(record.name, fields)
        except Exception:  # never break torchft's logging (nor its quorum thread)
            self.handleError(record)


class TorchftHooks:
    """ftaudit's view of one rank of a torchft replica group (the cell ``hooks.cell``)."""

    def __init__(self, manager: Manager, hooks: TrainerHooks, replica_id: str) -> None:
        self.manager = manager
        self.hooks = hooks
        self.replica_id = replica_id
        self.group_rank = hooks.rank
        self.quorum_id: int | None = None
        self.healed_from: int | None = None
        """The cell this group's state came from at its last heal (None: never healed)."""
        self._handler = _Records(self)

    @classmethod
    def attach(cls, manager: Manager, hooks: TrainerHooks, *, replica_id: str) -> TorchftHooks:
        """Follow ``manager`` (built with ``replica_id``) for ``hooks``' rank.

        Call it after every other state function was registered with the Manager, so
        the heal checksums are taken once all of the received state is loaded. It sets
        torchft's two record loggers to INFO (torchft logs them at INFO).
        """
        self = cls(manager, hooks, replica_id)
        manager.register_state_dict_fn(STATE_KEY, self._on_heal, self._heal_state)
        for name in (QUORUMS_LOGGER, COMMITS_LOGGER):
            logger = logging.getLogger(name)
            logger.setLevel(logging.INFO)
            logger.addHandler(self._handler)
        return self

    def close(self) -> None:
        """Stop following torchft's records (the Manager keeps the state function)."""
        for name in (QUORUMS_LOGGER, COMMITS_LOGGER):
            logging.getLogger(name).removeHandler(self._handler)

    # -- step and outcome ----------------------------------------------------------------

    def check_step(self, step: int) -> None:
        """Refuse to train ``step`` (the driver's) unless it is the Manager's step."""
        current = self.manager.current_step()
        if current != step:
            raise RuntimeError(
                f"cell {self.hooks.cell}: the driver's step {step} is not the torchft "
                f"Manager's step {current}; the replica group is out of step"
            )

    def optimizer_step(
        self,
        optimizer: torch.optim.Optimizer,
        stale_ids: IntRuns | Sequence[int] | np.ndarray,
        *,
        checksum: bool = False,
    ) -> RankOutcome:
        """Step ``optimizer`` if torchft commits; log the evidence; return the outcome.

        With an ``OptimizerWrapper`` its ``step()`` decides (committed iff the Manager's
        step advanced); with a plain optimizer ``should_commit()`` is called here. Inside
        ``hooks.step(step, attempt)``.
        """
        if isinstance(optimizer, OptimizerWrapper):
            before = self.manager.current_step()
            optimizer.step()
            committed = self.manager.current_step() > before
        else:
            committed = self.manager.should_commit()
            if committed:
                optimizer.step()
        if committed:
            self.hooks.after_optimizer_step(stale_ids, checksum=checksum)
            return RankOutcome.NORMAL
        self.hooks.after_discard(stale_ids)
        return RankOutcome.DISCARDED_SHOULD_RETRY

    # -- heals -----------------------------------------------------------------------------

    def _heal_state(self) -> dict[str, int]:
        """Called by the sending group's Manager in its quorum. The state functions hand
        over the live tensors, which the receiver reads before this group steps again:
        what is logged here is what it receives."""
        with step_context(self.manager.current_step(), 0):
            self.hooks.log_checksums(ChecksumWhen.AFTER_HEAL)
        self.hooks.flush()
        return {"cell": self.hooks.cell}

    def _on_heal(self, state: dict[str, int]) -> None:
        """The Manager loaded a peer's state into this group: log where it came from."""
        self.healed_from = int(state["cell"])
        with step_context(self.manager.current_step(), 0):
            self.hooks.writer.log(
                CellReconfigured(
                    quorum_id=self.quorum_id if self.quorum_id is not None else -1,
                    heal_source=self.healed_from,
                    healed_cells=[self.hooks.cell],
                    alive_cells=[self.hooks.cell, self.healed_from],
                )
            )
            self.hooks.log_checksums(ChecksumWhen.AFTER_HEAL, source_cell=self.healed_from)
        self.hooks.flush()

    # -- torchft's records -----------------------------------------------------------------

    def on_record(self, logger: str, fields: Mapping[str, object]) -> None:
        """One of torchft's records of this rank (called from torchft's threads too)."""
        quorum_id = int(fields["quorum_id"])  # type: ignore[call-overload]
        step = int(fields["step"])  # type: ignore[call-overload]
        if logger == QUORUMS_LOGGER:
            self.hooks.writer.log(
                TorchftQuorum(
                    quorum_id=quorum_id,
                    torchft_step=step,
                    replica_id=self.replica_id,
                    group_rank=self.group_rank,
                )
            )
            if quorum_id != self.quorum_id:
                self.quorum_id = quorum_id
                self.hooks.writer.log(
                    CellReconfigured(step=step, quorum_id=quorum_id, alive_cells=[self.hooks.cell])
                )
        elif logger == COMMITS_LOGGER:
            self.hooks.writer.log(
                TorchftCommit(
                    quorum_id=quorum_id,
                    torchft_step=step,
                    commit_result=bool(fields["commit_result"]),
                    replica_id=self.replica_id,
                    group_rank=self.group_rank,
                )
            )
