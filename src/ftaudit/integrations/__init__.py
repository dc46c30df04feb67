"""Callbacks for the training frameworks people already use (each an optional extra).

- :mod:`ftaudit.integrations.hf`: ``transformers.Trainer`` (extra ``hf``)
- :mod:`ftaudit.integrations.lightning`: Lightning ``Trainer`` (extra ``lightning``)
- :mod:`ftaudit.integrations.pytorch_lightning`: the same for the standalone
  ``pytorch_lightning`` package

This package imports nothing itself; each module imports its framework (and torch).
The implementations live in :mod:`ftaudit.trainer_hooks`.
"""
