"""Weight checksums from inference engines over HTTP: SGLang and vLLM (no torch).

Both engines hash their weights themselves and answer one JSON request; this module
only asks and reshapes the answer into ``{rank prefix}/{tensor} -> hash``. The request
and response shapes followed are those documented in ``docs/integrations.md`` (SGLang's
``POST /weights_checker`` with ``{"action": "checksum"}``; vLLM's ``POST /weight_checker``
with the same body). They were taken from the engines' sources and pull requests and
tested against a server of the tests, not against a live engine.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from ftaudit.trainer_hooks.engines.base import EngineChecksumError, merge_ranks, rank_prefix

DEFAULT_TIMEOUT_S = 300.0
"""Hashing every weight of a large model on the engine takes seconds to minutes."""


def post_json(
    url: str, body: dict[str, Any], *, timeout_s: float, api_key: str | None, engine: str
) -> tuple[int, Any]:
    """POST ``body`` as JSON; the status and the decoded JSON answer (errors included)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:  # 4xx/5xx: the body says why
        status, raw = exc.code, exc.read()
        exc.close()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EngineChecksumError(engine, f"cannot reach {url}: {reason}") from exc
    try:
        return status, json.loads(raw.decode() or "null")
    except (UnicodeDecodeError, json.JSONDecodeError):
        snippet = raw[:200].decode(errors="replace")
        raise EngineChecksumError(
            engine, f"{url} answered {status} with a body that is not JSON: {snippet!r}"
        ) from None


def _error_text(answer: Any) -> str:
    if isinstance(answer, dict):
        for key in ("message", "detail", "error"):
            if key in answer:
                return str(answer[key])
    return json.dumps(answer)[:200]


@dataclass
class SGLangEngine:
    """An SGLang server: ``POST {url}/weights_checker`` with ``{"action": "checksum"}``.

    SGLang answers ``{"success": true, "message": ..., "ranks": [...],
    "per_engine_checksum": ...}`` with one entry per GPU of the engine, each
    ``{"checksums": {tensor: hash}, "per_gpu_checksum": ..., "parallelism_info":
    {"tp_rank", "tp_size", "dp_rank", "dp_size", "pp_rank", "pp_size", "rank",
    "size"}}``. Tensors are named ``tp{tp_rank}/<name>`` (with ``pp``/``dp`` where the
    engine has several). ``api_key`` is sent as a bearer token (servers started with
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
        status, answer = post_json(
            self.url.rstrip("/") + self.endpoint,
            self.request_body(),
            timeout_s=self.timeout_s,
            api_key=self.api_key,
            engine=name,
        )
        if status != 200 or not isinstance(answer, dict) or answer.get("success") is not True:
            raise EngineChecksumError(
                name, f"weights_checker failed ({status}): {_error_text(answer)}"
            )
        ranks = answer.get("ranks")
        if not isinstance(ranks, list) or not ranks:
            raise EngineChecksumError(
                name,
                "the answer has no per-rank checksums ('ranks'): this SGLang build does not "
                "support the 'checksum' action of /weights_checker",
            )
        return merge_ranks(name, (self._rank(name, r) for r in ranks))

    @staticmethod
    def _rank(name: str, rank: Any) -> tuple[str, dict[str, str]]:
        try:
            info, hashes = rank["parallelism_info"], rank["checksums"]
            prefix = rank_prefix(
                int(info["tp_rank"]),
                pp_rank=int(info.get("pp_rank", 0)),
                pp_size=int(info.get("pp_size", 1)),
                dp_rank=int(info.get("dp_rank", 0)),
                dp_size=int(info.get("dp_size", 1)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise EngineChecksumError(
                name, f"a rank entry lacks checksums or parallelism_info ({exc!r})"
            ) from None
        if not isinstance(hashes, dict):
            raise EngineChecksumError(name, f"rank {prefix}: 'checksums' is not an object")
        return prefix, hashes


_VLLM_RANKED = re.compile(r"^(\d+):(.+)$")


@dataclass
class VLLMEngine:
    """A vLLM server: ``POST {url}/weight_checker`` with ``{"action": "checksum"}``.

    vLLM answers ``{"checksums": {"<tp_rank>:<tensor>": sha256 hex}}`` (one map for all
    tensor-parallel workers). ``<tp_rank>:<tensor>`` becomes ``tp{tp_rank}/<tensor>``;
    a name without a rank is taken as rank 0's. The endpoint is a development one: start
    the server with ``VLLM_SERVER_DEV_MODE=1``.
    """

    url: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    kind = "vllm"
    endpoint = "/weight_checker"

    def describe(self) -> str:
        return f"vllm {self.url}"

    def request_body(self) -> dict[str, Any]:
        return {"action": "checksum"}

    def checksums(self) -> dict[str, str]:
        name = self.describe()
        status, answer = post_json(
            self.url.rstrip("/") + self.endpoint,
            self.request_body(),
            timeout_s=self.timeout_s,
            api_key=self.api_key,
            engine=name,
        )
        if status != 200 or not isinstance(answer, dict):
            raise EngineChecksumError(
                name, f"weight_checker failed ({status}): {_error_text(answer)}"
            )
        hashes = answer.get("checksums")
        if not isinstance(hashes, dict):
            raise EngineChecksumError(
                name, f"the answer has no 'checksums' map: {_error_text(answer)}"
            )
        return merge_ranks(name, (_vllm_entry(key, value) for key, value in hashes.items()))


def _vllm_entry(key: str, value: str) -> tuple[str, dict[str, str]]:
    match = _VLLM_RANKED.match(key)
    rank, tensor = (int(match[1]), match[2]) if match else (0, key)
    return rank_prefix(rank), {tensor: value}
