"""``FtauditCallback`` for the ``lightning`` package (``lightning.pytorch.Trainer``)."""

from __future__ import annotations

import lightning.pytorch as pl

from ftaudit.trainer_hooks.lightning.hooks import FtauditHooks


class FtauditCallback(FtauditHooks, pl.Callback):
    """Records a ``lightning.pytorch`` run for ``ft-verify``; see :class:`FtauditHooks`."""
