"""``FtauditCallback`` for the standalone ``pytorch_lightning`` package."""

from __future__ import annotations

import pytorch_lightning as pl

from ftaudit.trainer_hooks.lightning.hooks import FtauditHooks


class FtauditCallback(FtauditHooks, pl.Callback):
    """Records a ``pytorch_lightning`` run for ``ft-verify``; see :class:`FtauditHooks`."""
