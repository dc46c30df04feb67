"""One JSON request to an engine's HTTP server (no torch, standard library only).

The SGLang and vLLM adapters (``sglang.py``, ``vllm.py``) ask their checker endpoint
through :func:`ask_checker` and turn an error answer into a message with
:func:`error_text`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Protocol

from ftaudit.trainer_hooks.engines.base import EngineChecksumError

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


class CheckerEndpoint(Protocol):
    """An engine server with a weight-checker endpoint (``SGLangEngine``, ``VLLMEngine``)."""

    url: str
    api_key: str | None
    timeout_s: float
    endpoint: str

    def describe(self) -> str: ...

    def request_body(self) -> dict[str, Any]: ...


def ask_checker(engine: CheckerEndpoint) -> tuple[int, Any]:
    """POST the engine's request body to ``{url}{endpoint}``; the status and the answer."""
    return post_json(
        engine.url.rstrip("/") + engine.endpoint,
        engine.request_body(),
        timeout_s=engine.timeout_s,
        api_key=engine.api_key,
        engine=engine.describe(),
    )


def error_text(answer: Any) -> str:
    """The reason an engine gave (``message``, ``detail`` or ``error``), else the answer itself."""
    if isinstance(answer, dict):
        for key in ("message", "detail", "error"):
            if key in answer:
                return str(answer[key])
    return json.dumps(answer)[:200]
