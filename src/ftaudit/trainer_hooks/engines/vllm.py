"""vLLM's weight checksums (EXPERIMENTAL): ``POST /weight_checker`` with ``{"action": "checksum"}``.

The endpoint is vllm-project/vllm pull request #51350 ("support rl feature: weight
checker", RFC #52689), open and not merged: its format may still change, and this
adapter follows it as of the commits named in ``docs/integrations.md``. vLLM answers
``{"checksums": {key: sha256 hex}}``, one map for every worker of the engine, with one of
two key forms:

- ``<tp>:<name>`` (the first revisions of the pull request): labelled ``tp{t}/<name>``;
- ``dp{d}:pp{p}:pcp{c}:tp{t}:ep{e}:<name>`` (later revisions, one entry per
  data-parallel rank): labelled ``dp{d}.pp{p}.pcp{c}.tp{t}.ep{e}/<name>``.

Any other key, or both forms in one answer, is refused: guessing a rank would file
tensors of different GPUs under one name. The endpoint needs ``VLLM_SERVER_DEV_MODE=1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ftaudit.trainer_hooks.engines.base import EngineChecksumError, merge_ranks, rank_label
from ftaudit.trainer_hooks.engines.http import DEFAULT_TIMEOUT_S, ask_checker, error_text

KEY_FORMS: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "tp": (re.compile(r"^(\d+):(.+)$"), ("tp",)),
    "full": (
        re.compile(r"^dp(\d+):pp(\d+):pcp(\d+):tp(\d+):ep(\d+):(.+)$"),
        ("dp", "pp", "pcp", "tp", "ep"),
    ),
}
"""Each key form of vLLM's checksum map: its pattern (ranks, then the tensor name) and axes."""


def parse_key(engine: str, key: str) -> tuple[str, str, str]:
    """``(form, rank label, tensor name)`` of one checksum key; an unknown form is refused."""
    for form, (pattern, axes) in KEY_FORMS.items():
        match = pattern.match(key)
        if match:
            *ranks, tensor = match.groups()
            label = rank_label(*zip(axes, (int(r) for r in ranks), strict=True))
            return form, label, tensor
    raise EngineChecksumError(
        engine,
        f"unknown checksum key form {key!r}: expected '<tp>:<name>' or "
        "'dp<d>:pp<p>:pcp<c>:tp<t>:ep<e>:<name>' (vLLM's weight checker is unmerged and "
        "may have changed its format)",
    )


def parse_checksums(engine: str, hashes: dict[str, Any]) -> dict[str, str]:
    """``{label}/{tensor} -> hash`` from vLLM's map; keys of two forms in one answer are refused."""
    per_key = [(parse_key(engine, str(key)), value) for key, value in hashes.items()]
    forms = sorted({form for (form, _, _), _ in per_key})
    if len(forms) > 1:
        raise EngineChecksumError(engine, f"the answer mixes checksum key forms {forms}")
    return merge_ranks(engine, ((label, {tensor: value}) for (_, label, tensor), value in per_key))


@dataclass
class VLLMEngine:
    """A vLLM server (experimental): ``POST {url}/weight_checker`` with ``{"action": "checksum"}``.

    Start the server with ``VLLM_SERVER_DEV_MODE=1`` and a vLLM that has the weight
    checker of pull request #51350 (see the module docstring for the key forms).
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
        status, answer = ask_checker(self)
        if status != 200 or not isinstance(answer, dict):
            raise EngineChecksumError(
                name, f"weight_checker failed ({status}): {error_text(answer)}"
            )
        hashes = answer.get("checksums")
        if not isinstance(hashes, dict):
            raise EngineChecksumError(
                name, f"the answer has no 'checksums' map: {error_text(answer)}"
            )
        return parse_checksums(name, hashes)
