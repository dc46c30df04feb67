"""Small HTTP servers that answer like SGLang's and vLLM's weight checkers (test only).

They hold real torch tensors, one set per GPU (data-parallel, pipeline and
tensor-parallel rank), hash them and answer field by field in the shapes of the
upstream sources named below. They run in a thread of the test process on a free
loopback port. Nothing here is copied from upstream: the shapes were read and rebuilt.

Upstream sources followed (read with the project's code search; no engine runs here):

SGLang
  - ``python/sglang/srt/utils/weight_checker.py``, sgl-project/sglang at commit
    05bed317e2b179bf53c1e33b8c5ffb460180ac94: ``ChecksumInfo`` = ``checksums`` (tensor ->
    ``f"{tensor_hash(t):016x}"``, a 64-bit value computed on the GPU), ``per_gpu_checksum``
    (sha256 over the sorted names, each name then its hash) and ``parallelism_info`` (one
    object: tp/dp/pp rank and size, world ``rank`` and ``size``); ``WeightChecker.handle``
    raises ``Exception(f"Unsupported {action=}")`` for an action it lacks.
  - ``python/sglang/srt/managers/scheduler_components/weight_updater.py``,
    guapisolo/sglang at commit 2ba065080225da8085edd62c3e060eeff7a6e751:
    ``_merge_checksum_payloads(target, draft)`` merges a speculative draft model's hashes
    under ``draft.<name>`` into the target's map, one ``parallelism_info`` object kept;
    ``check_weights`` answers ``success=False, message=str(e)`` when the checker raises.
  - The per-role shape: sgl-project/sglang pull request #27750 ("extend weight checker
    to speculative draft worker(s)", merged 2026-06-10): ``parallelism_info`` becomes a
    list of per-role objects ``{"role": role or "target", **parallelism_info}``, and the
    keys of non-target roles are prefixed ``f"{role}.{name}"`` (``draft.``,
    ``draft_step_<i>.``), ``per_gpu_checksum`` recomputed over the merged map. The code
    search shows this ``_merge_checksum_payloads(role_payloads)`` in the index, but could
    not pin the repository file and commit that holds it: the pull request, not a
    commit, is the citation for this shape.
  - The HTTP answer (``/weights_checker`` in ``python/sglang/srt/entrypoints/http_server.py``
    and ``check_weights`` of the tokenizer manager, as shown by the code search; the
    stored sgl-project copies of both files predate the endpoint, so no commit is cited):
    ``{"success", "message"}`` plus ``ranks`` (every DP rank's entries, in order) and
    ``per_engine_checksum`` (sha256 over the ranks' ``per_gpu_checksum``), status 200 on
    success else 400.

vLLM (pull request #51350, open, not merged)
  - ``POST /weight_checker`` ``{"action": "checksum"}`` -> ``{"checksums": {key: hex}}``,
    sha256 of ``tensor.data.contiguous().cpu().view(torch.uint8)`` bytes (description).
  - Keys ``f"{tp_rank}:{name}"`` in the revision reviewed on 2026-08-18
    (``vllm/v1/worker/gpu_worker.py``, review thread of the pull request), and
    ``dp{d}:pp{p}:pcp{c}:tp{t}:ep{e}:<name>`` at commit
    e143afe8e6be6c2da3ad39c8fe8b1e8e7998fd65 (``vllm/v1/worker/gpu_worker.py`` line 345,
    per the review of 2026-09-19), the maps of the data-parallel ranks combined into one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import torch
from torch import nn

Gpu = tuple[int, int, int]
"""(dp rank, pp rank, tp rank) of one GPU of an engine."""


def raw_bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()


def sha256_hex(t: torch.Tensor) -> str:
    """What vLLM returns per tensor: sha256 of the raw bytes."""
    return hashlib.sha256(raw_bytes(t)).hexdigest()


def short_hex(t: torch.Tensor) -> str:
    """A 64-bit value as SGLang formats it (``f"{h:016x}"``).

    SGLang's own ``tensor_hash`` runs on the GPU and cannot be reproduced here; the
    adapters treat hashes as opaque strings, so any 64-bit hash of the bytes will do.
    """
    value = int.from_bytes(hashlib.blake2b(raw_bytes(t), digest_size=8).digest(), "big")
    return f"{value:016x}"


def overall(hashes: Mapping[str, str]) -> str:
    """SGLang's ``per_gpu_checksum``: sha256 over the sorted names, each then its hash."""
    h = hashlib.sha256()
    for name in sorted(hashes):
        h.update(name.encode())
        h.update(hashes[name].encode())
    return h.hexdigest()


def shard(state: Mapping[str, torch.Tensor], rank: int, size: int) -> dict[str, torch.Tensor]:
    """Rank ``rank``'s copy of ``state`` in a tensor-parallel group of ``size``.

    Matrices are split along their first dimension (column parallel); vectors and
    scalars are replicated, like norms are in real engines.
    """
    out = {}
    for name, value in state.items():
        if value.dim() == 2 and value.shape[0] % size == 0:
            value = value.chunk(size, dim=0)[rank]
        out[name] = value.detach().clone()
    return out


@dataclass
class FakeEngine:
    """One engine of ``dp * pp * tp`` GPUs, each with its tensors (pp ranks split the names).

    ``sglang_shape``: ``"roles"`` answers with the per-role ``parallelism_info`` list,
    ``"object"`` with one object per rank entry (draft tensors merged under ``draft.``).
    ``vllm_keys``: ``"full"`` (``dp..:pp..:pcp..:tp..:ep..:``) or ``"tp"`` (``<tp>:``).
    """

    kind: Literal["sglang", "vllm"]
    tp: int = 1
    pp: int = 1
    dp: int = 1
    sglang_shape: Literal["roles", "object"] = "roles"
    vllm_keys: Literal["full", "tp"] = "full"
    checksum_action: bool = True
    """False: an SGLang from before the ``checksum`` action (it answers 400)."""
    api_key: str | None = None
    failure: str | None = None
    """When set, SGLang's checker fails with this message (400, ``success: false``)."""
    ranks: dict[Gpu, dict[str, torch.Tensor]] = field(default_factory=dict)
    draft: dict[Gpu, dict[str, torch.Tensor]] = field(default_factory=dict)
    """A speculative draft model's tensors on each GPU (SGLang only)."""
    requests: list[dict[str, Any]] = field(default_factory=list)

    def gpus(self) -> list[Gpu]:
        return [(d, p, t) for d in range(self.dp) for p in range(self.pp) for t in range(self.tp)]

    def load(
        self,
        state: Mapping[str, torch.Tensor],
        draft: Mapping[str, torch.Tensor] | None = None,
    ) -> None:
        """A weight sync: every GPU receives its shard (pipeline stages split the names)."""
        for holder, tensors in ((self.ranks, state), (self.draft, draft or {})):
            names = sorted(tensors)
            for d, p, t in self.gpus():
                stage = {n: tensors[n] for n in names[p :: self.pp]}
                holder[(d, p, t)] = shard(stage, t, self.tp)

    def load_modules(self, modules: list[nn.Module]) -> None:
        """One module per tensor-parallel rank (dp = pp = 1)."""
        for t, module in enumerate(modules):
            self.ranks[(0, 0, t)] = {k: v.detach().clone() for k, v in module.state_dict().items()}

    def tensor(
        self, name: str, tp_rank: int = 0, pp_rank: int = 0, dp_rank: int = 0
    ) -> torch.Tensor:
        return self.ranks[(dp_rank, pp_rank, tp_rank)][name]

    # -- answers ---------------------------------------------------------------------

    def answer(self, path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        self.requests.append({"path": path, "body": body})
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return 401, {"detail": "Unauthorized"}
        if self.kind == "sglang" and path == "/weights_checker":
            return self._sglang(body)
        if self.kind == "vllm" and path == "/weight_checker":
            return self._vllm(body)
        return 404, {"detail": "Not Found"}

    def _parallelism_info(self, gpu: Gpu) -> dict[str, int]:
        d, p, t = gpu
        per_dp = self.pp * self.tp
        return {
            "tp_rank": t,
            "tp_size": self.tp,
            "dp_rank": d,
            "dp_size": self.dp,
            "pp_rank": p,
            "pp_size": self.pp,
            "rank": p * self.tp + t,  # the world of one DP rank's scheduler processes
            "size": per_dp,
        }

    def _sglang_entry(self, gpu: Gpu, skip: list[str]) -> dict[str, Any]:
        def hashes(tensors: Mapping[str, torch.Tensor]) -> dict[str, str]:
            return {n: short_hex(v) for n, v in tensors.items() if not any(s in n for s in skip)}

        target, draft = hashes(self.ranks[gpu]), hashes(self.draft.get(gpu, {}))
        merged = {**target, **{f"draft.{n}": h for n, h in draft.items()}}
        info: dict[str, Any] | list[dict[str, Any]] = self._parallelism_info(gpu)
        if self.sglang_shape == "roles":
            roles = ["target"] + (["draft"] if draft else [])
            info = [{"role": role, **self._parallelism_info(gpu)} for role in roles]
        return {"checksums": merged, "per_gpu_checksum": overall(merged), "parallelism_info": info}

    def _sglang(self, body: Any) -> tuple[int, Any]:
        action = body.get("action") if isinstance(body, dict) else None
        if action != "checksum" or not self.checksum_action:
            return 400, {"success": False, "message": f"Unsupported {action=}"}
        if self.failure is not None:
            return 400, {"success": False, "message": self.failure}
        skip = body.get("skip_tensor_list") or []
        entries = [self._sglang_entry(gpu, skip) for gpu in self.gpus()]
        engine = hashlib.sha256()
        for entry in entries:
            engine.update(entry["per_gpu_checksum"].encode())
        return 200, {
            "success": True,
            "message": "Success.",
            "ranks": entries,
            "per_engine_checksum": engine.hexdigest(),
        }

    def _vllm_key(self, gpu: Gpu, name: str) -> str:
        d, p, t = gpu
        if self.vllm_keys == "tp":
            return f"{t}:{name}"
        return f"dp{d}:pp{p}:pcp0:tp{t}:ep0:{name}"

    def _vllm(self, body: Any) -> tuple[int, Any]:
        action = body.get("action") if isinstance(body, dict) else None
        if action != "checksum":
            return 400, {"error": f"unknown action {action!r}"}
        sums = {
            self._vllm_key(gpu, n): sha256_hex(v)
            for gpu, tensors in sorted(self.ranks.items())
            for n, v in tensors.items()
        }
        return 200, {"checksums": sums}


class _Handler(BaseHTTPRequestHandler):
    engine: FakeEngine
    raw_reply: bytes | None = None

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except json.JSONDecodeError:
            body = None
        if self.raw_reply is not None:
            status, data = 200, self.raw_reply
        else:
            status, answer = self.engine.answer(self.path, body, self.headers.get("Authorization"))
            data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass


@contextmanager
def serve(engine: FakeEngine, raw_reply: bytes | None = None) -> Iterator[str]:
    """Serve ``engine`` on a free loopback port; yields its base URL."""
    handler = type("Handler", (_Handler,), {"engine": engine, "raw_reply": raw_reply})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.02,), name="fake-engine", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
