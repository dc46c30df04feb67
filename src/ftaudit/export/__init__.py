"""Metrics out of a run: the committed history's metrics as TensorBoard event files or CSV.

Only metrics of committed step attempts are exported: a retried attempt's or a
rolled-back incarnation's values never reach a dashboard, so a step that was trained
twice shows once, with the values of the attempt that counts. Nothing here imports torch
or TensorBoard: the event files are written by :mod:`ftaudit.export.tfrecord` and
:mod:`ftaudit.export.tensorboard`.
"""

from ftaudit.export.metrics import CommittedMetric, committed_metrics, write_csv
from ftaudit.export.tensorboard import write_tensorboard

__all__ = ["CommittedMetric", "committed_metrics", "write_csv", "write_tensorboard"]
