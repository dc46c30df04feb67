"""SGLang's weight checksums: ``POST /weights_checker`` with ``{"action": "checksum"}`` (no torch).

SGLang answers ``{"success": true, "message": ..., "ranks": [...], "per_engine_checksum":
...}`` with one rank entry per GPU of the engine (data-parallel ranks included), each
``{"checksums": {tensor: hash}, "per_gpu_checksum": ..., "parallelism_info": ...}``.
``parallelism_info`` comes in two shapes, both accepted:

- **one object** ``{"tp_rank", "tp_size", "dp_rank", "dp_size", "pp_rank", "pp_size",
  "rank", "size"}`` (``ChecksumInfo`` in ``python/sglang/srt/utils/weight_checker.py``),
  in SGLang releases and in builds that merge a speculative draft model's tensors into
  the same map under ``draft.``;
- **a list of per-role objects**, the same fields plus ``"role"`` (``"target"``,
  ``"draft"``, ``"draft_step_<i>"``), with the checksum keys of every non-target role
  prefixed ``<role>.`` (sgl-project/sglang pull request #27750, the SGLang that RL
  frameworks build on).

Each tensor is labelled with the full coordinates of the role it belongs to
(``dp{d}.pp{p}.tp{t}/<name>``); draft tensors keep their ``draft.`` prefix, so they are
compared with the draft tensors of the other engines, never with a target tensor.

An SGLang without the ``checksum`` action answers HTTP 400 with ``Unsupported
action='checksum'`` (its ``WeightChecker.handle`` raises for an unknown action); that is
reported as :class:`~ftaudit.trainer_hooks.engines.ChecksumUnsupportedError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ftaudit.trainer_hooks.engines.base import (
    ChecksumUnsupportedError,
    EngineChecksumError,
    merge_ranks,
    rank_label,
)
from ftaudit.trainer_hooks.engines.http import DEFAULT_TIMEOUT_S, ask_checker, error_text

TARGET_ROLE = "target"
"""The role of the served model; its checksum keys carry no role prefix."""

COORDINATES = ("dp", "pp", "tp")
"""The axes of ``parallelism_info``, outermost first: they make up a tensor's rank label."""

_NO_CHECKSUM_ACTION = re.compile(r"Unsupported action\s*=\s*'checksum'")


@dataclass(frozen=True)
class RoleRank:
    """One role (target or a draft) of one GPU: the label its tensors are filed under."""

    role: str
    label: str


def _coordinate(engine: str, info: dict[str, Any], axis: str) -> tuple[str, int]:
    rank, size = info.get(f"{axis}_rank"), info.get(f"{axis}_size")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rank, size)):
        raise EngineChecksumError(
            engine, f"parallelism_info lacks integer {axis}_rank/{axis}_size: {info!r}"
        )
    if not 0 <= rank < size:  # type: ignore[operator]
        raise EngineChecksumError(
            engine, f"parallelism_info has {axis}_rank {rank} outside a group of {size}"
        )
    return axis, rank  # type: ignore[return-value]


def parse_role(engine: str, info: Any, *, listed: bool) -> RoleRank:
    """The role and rank label of one ``parallelism_info`` object.

    ``listed``: the object is an item of the per-role list, so it must name its role.
    """
    if not isinstance(info, dict):
        raise EngineChecksumError(engine, f"parallelism_info is not an object: {info!r}")
    role = info.get("role", None if listed else TARGET_ROLE)
    if not isinstance(role, str) or not role:
        raise EngineChecksumError(engine, f"a per-role parallelism_info has no role: {info!r}")
    return RoleRank(role, rank_label(*(_coordinate(engine, info, a) for a in COORDINATES)))


def _roles(engine: str, info: Any) -> dict[str, RoleRank]:
    if isinstance(info, dict):
        roles = [parse_role(engine, info, listed=False)]
    elif isinstance(info, list) and info:
        roles = [parse_role(engine, item, listed=True) for item in info]
    else:
        raise EngineChecksumError(
            engine, f"parallelism_info is neither an object nor a list of roles: {info!r}"
        )
    by_role = {r.role: r for r in roles}
    if len(by_role) != len(roles):
        raise EngineChecksumError(engine, f"a rank entry lists a role twice: {info!r}")
    return by_role


def _role_of(name: str, roles: dict[str, RoleRank]) -> RoleRank | None:
    """The non-target role whose ``<role>.`` prefixes ``name`` (the longest), else the target."""
    prefixed = [
        r for r in roles.values() if r.role != TARGET_ROLE and name.startswith(f"{r.role}.")
    ]
    if prefixed:
        return max(prefixed, key=lambda r: len(r.role))
    return roles.get(TARGET_ROLE)


def rank_entry(engine: str, entry: Any) -> Iterator[tuple[RoleRank, dict[str, str]]]:
    """The tensors of one rank entry (one GPU), grouped by the role they belong to."""
    if not isinstance(entry, dict) or not isinstance(entry.get("checksums"), dict):
        raise EngineChecksumError(
            engine, f"a rank entry has no 'checksums' object: {entry!r}"[:300]
        )
    roles = _roles(engine, entry.get("parallelism_info"))
    grouped: dict[str, dict[str, str]] = {role: {} for role in roles}
    for name, value in entry["checksums"].items():
        role = _role_of(str(name), roles)
        if role is None:
            raise EngineChecksumError(
                engine, f"tensor {name!r} belongs to none of the roles {sorted(roles)}"
            )
        grouped[role.role][name] = value
    for role, hashes in grouped.items():
        if hashes:
            yield roles[role], hashes


def parse_ranks(engine: str, ranks: Any) -> dict[str, str]:
    """``{label}/{tensor} -> hash`` over every rank entry.

    Two entries may file a tensor under the same label only with the same hash: a role
    replicated on several GPUs (a draft with a tensor-parallel group of one, say) reports
    the same coordinates from each of them, and different hashes there are refused.
    """
    if not isinstance(ranks, list) or not ranks:
        raise EngineChecksumError(engine, f"'ranks' is not a non-empty list: {ranks!r}"[:300])
    per_rank = [
        (role.label, hashes) for entry in ranks for role, hashes in rank_entry(engine, entry)
    ]
    return merge_ranks(engine, per_rank)


@dataclass
class SGLangEngine:
    """An SGLang server: ``POST {url}/weights_checker`` with ``{"action": "checksum"}``.

    Tensors are named ``dp{d}.pp{p}.tp{t}/<name>`` (see the module docstring for the
    answer shapes). ``api_key`` is sent as a bearer token (servers started with
    ``--api-key`` or an admin key).
    """

    url: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    skip_tensors: list[str] = field(default_factory=list)
    """Name patterns SGLang should leave out (its ``skip_tensor_list``), e.g. kv scales."""

    kind = "sglang"
    endpoint = "/weights_checker"

    def describe(self) -> str:
        return f"sglang {self.url}"

    def request_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"action": "checksum"}
        if self.skip_tensors:
            body["skip_tensor_list"] = list(self.skip_tensors)
        return body

    def checksums(self) -> dict[str, str]:
        name = self.describe()
        status, answer = ask_checker(self)
        if status != 200 or not isinstance(answer, dict) or answer.get("success") is not True:
            reason = error_text(answer)
            if status == 400 and _NO_CHECKSUM_ACTION.search(reason):
                raise ChecksumUnsupportedError(
                    name,
                    f"engine has no checksum action ({reason}): this SGLang predates the "
                    "'checksum' action of /weights_checker",
                )
            raise EngineChecksumError(name, f"weights_checker failed ({status}): {reason}")
        if "ranks" not in answer:
            raise ChecksumUnsupportedError(
                name, "engine has no checksum action: the answer has no per-rank 'ranks'"
            )
        return parse_ranks(name, answer["ranks"])
