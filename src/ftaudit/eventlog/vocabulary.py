"""The event schema's closed vocabularies (enums) and checksum-name tags, without pydantic.

The verifier compares stored values with these; the models of ``events.py`` use them as
field types. They live apart from the models so that reading a run imports no pydantic
model (``tests/verifier/test_startup_imports.py``).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    KILLED = "killed"


class RankOutcome(StrEnum):
    NORMAL = "normal"
    DISCARDED_SHOULD_RETRY = "discarded_should_retry"


class ChecksumWhen(StrEnum):
    AFTER_STEP = "after_step"
    AT_SAVE = "at_save"
    AFTER_LOAD = "after_load"
    AFTER_HEAL = "after_heal"


class LoaderWhen(StrEnum):
    SAVED = "saved"
    RESUMED = "resumed"


class FaultMode(StrEnum):
    SIGKILL = "sigkill"
    EXIT = "exit"
    SEGFAULT = "segfault"
    HANG = "hang"


SHARD_TAG = "@rows"
"""A checksum name ending in ``@rows[a:b]`` hashes a local shard (rows ``a .. b-1``) of a
tensor sharded by rows (FSDP2); an untagged name hashes a tensor the rank holds whole. A
shard is compared only with the same shard: after a resharding, the ``@whole`` digests
compare."""

WHOLE_TAG = "@whole"
"""A checksum name ending in ``@whole`` is a digest of the whole tensor that does not
depend on the parallel layout (how its rows are split over ranks, or whether they are at
all), logged at save, load and heal for every tensor, so a restore over another layout
(another world size, FSDP saved and DDP resumed) compares. See
``trainer_hooks/torch/dtensor.py`` for the digest."""


def tensor_of(name: str) -> str:
    """The tensor a checksum name is about, without its layout tag (``@rows[a:b]``,
    ``@whole``)."""
    for tag in (SHARD_TAG + "[", WHOLE_TAG):
        cut = name.find(tag)
        if cut >= 0:
            return name[:cut]
    return name


__all__ = [
    "SHARD_TAG",
    "WHOLE_TAG",
    "ChecksumWhen",
    "FaultMode",
    "LoaderWhen",
    "RankOutcome",
    "RunStatus",
    "tensor_of",
]
