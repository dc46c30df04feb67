"""After each weight sync: ask every engine for its weight hashes, log one event (no torch).

One :class:`~ftaudit.eventlog.events.EngineWeightChecksum` per sync holds every engine's
map, so FT007 compares the engines of that sync tensor by tensor. An engine that cannot
be read does not stop training (unless ``errors="raise"``): it is logged with the single
tensor ``!error`` whose value names the engine and the reason, so the verifier reports
it as differing from the others instead of silently comparing fewer engines.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from ftaudit.errors import UsageError
from ftaudit.eventlog.events import EngineWeightChecksum
from ftaudit.eventlog.identity import Identity, RolloutManager
from ftaudit.eventlog.run import RunLog
from ftaudit.eventlog.writer import EventWriter, WriterOptions
from ftaudit.trainer_hooks.engines.base import (
    ERROR_TENSOR,
    EngineChecksumError,
    WeightChecksumSource,
)

log = logging.getLogger(__name__)

Engines = Mapping[int, WeightChecksumSource] | Sequence[WeightChecksumSource]


class EngineChecksumRecorder:
    """Collects the weight hashes of a fleet of engines and logs them after each sync.

    ``engines`` maps the engine index (as the rollout side numbers its engines) to an
    adapter (:class:`SGLangEngine`, :class:`VLLMEngine`, :class:`TorchModuleEngine`); a
    list is numbered from 0. It logs as ``source`` (default: ``RolloutManager()``).

    Typical use, in the process that pushes weights to the engines::

        recorder = EngineChecksumRecorder.attach(run_dir, incarnation, engines)
        sync_weights()                 # the initial sync, outside any step
        recorder.record()              # step None
        for step in ...:
            with step_context(step, attempt):
                ...                    # train, then push the new weights
                sync_weights()
                recorder.record()      # the sync of this step and attempt
    """

    def __init__(
        self,
        run: RunLog,
        engines: Engines,
        *,
        source: Identity | None = None,
        errors: Literal["record", "raise"] = "record",
        max_workers: int = 16,
    ) -> None:
        self.engines = dict(engines) if isinstance(engines, Mapping) else dict(enumerate(engines))
        if not self.engines:
            raise UsageError("no engines to record")
        if any(not isinstance(i, int) or i < 0 for i in self.engines):
            raise UsageError(
                f"engine indices must be non-negative ints, got {sorted(self.engines)}"
            )
        kinds = {e.kind for e in self.engines.values()}
        if len(kinds) > 1:
            raise UsageError(
                f"engines of different kinds ({', '.join(sorted(kinds))}) hash differently, so "
                "their checksums never compare equal: record each kind with its own recorder"
            )
        if errors not in ("record", "raise"):
            raise UsageError(f"errors must be 'record' or 'raise', not {errors!r}")
        self.run = run
        self.writer: EventWriter = run.writer(source or RolloutManager())
        self.errors = errors
        self.max_workers = max_workers
        self.failures = 0
        """How many engine reads failed (and were logged as ``!error``)."""
        self._warned = False

    @classmethod
    def attach(
        cls,
        run_dir: str | os.PathLike[str],
        incarnation: int,
        engines: Engines,
        *,
        source: Identity | None = None,
        errors: Literal["record", "raise"] = "record",
        options: WriterOptions | None = None,
    ) -> EngineChecksumRecorder:
        """Join incarnation ``incarnation`` of the run at ``run_dir`` (started by the driver)."""
        return cls(
            RunLog.attach(run_dir, incarnation, options), engines, source=source, errors=errors
        )

    def collect(self) -> dict[int, dict[str, str]]:
        """Every engine's ``tensor -> hash``, read concurrently.

        With ``errors="raise"`` the first failure (lowest engine index) is raised after
        all reads finished; with ``"record"`` a failed engine maps to ``{"!error": why}``.
        """
        items = sorted(self.engines.items())
        workers = max(1, min(self.max_workers, len(items)))
        with ThreadPoolExecutor(workers, thread_name_prefix="ftaudit-engines") as pool:
            futures = [(i, pool.submit(e.checksums)) for i, e in items]
            out: dict[int, dict[str, str]] = {}
            for index, future in futures:
                try:
                    out[index] = future.result()
                except EngineChecksumError as exc:
                    out[index] = self._failed(index, exc)
        return out

    def record(
        self, step: int | None = None, attempt: int | None = None, *, flush: bool = True
    ) -> dict[int, dict[str, str]]:
        """Collect and log one ``EngineWeightChecksum``; returns what was logged.

        ``step``/``attempt`` default to the current :func:`ftaudit.step_context`;
        outside any, the event has no step: the initial sync.
        """
        engines = self.collect()
        self.writer.log(EngineWeightChecksum(step=step, attempt=attempt, engines=engines))
        if flush:
            self.writer.flush()
        return engines

    def close(self) -> None:
        self.run.close()

    def _failed(self, index: int, exc: EngineChecksumError) -> dict[str, str]:
        if self.errors == "raise":
            raise exc
        self.failures += 1
        if not self._warned:
            self._warned = True
            log.warning("ftaudit: cannot read the weight checksums of engine %d: %s", index, exc)
        # the engine index makes two failed engines differ from each other, too
        return {ERROR_TENSOR: f"engine {index} unreadable: {exc}"}
