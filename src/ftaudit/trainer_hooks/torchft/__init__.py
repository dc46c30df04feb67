"""torchft's ``Manager`` as ftaudit sees it (extra ``ray``, which pins ``torchft==0.2.0``).

Read from torchft 0.2.0 (``torchft/manager.py``, ``torchft/optim.py``): a replica group
is a cell; ``Manager.current_step()`` counts the group's committed steps, so it is the
step of the next attempt, and a failed ``should_commit()`` leaves it unchanged (the step
is retried: the next attempt). A group that fell behind heals in ``start_quorum``: the
Manager fetches a peer's state and calls every registered ``load_state_dict`` function;
its step jumps to the peer's. torchft logs one record per quorum change on the logger
``torchft_quorums`` and one per ``should_commit()`` on ``torchft_commits``.
"""

from ftaudit.trainer_hooks.torchft.manager import (
    COMMITS_LOGGER,
    QUORUMS_LOGGER,
    TorchftHooks,
    any_committed,
)

__all__ = ["COMMITS_LOGGER", "QUORUMS_LOGGER", "TorchftHooks", "any_committed"]
