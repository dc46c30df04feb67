"""Small HTTP servers that answer like SGLang's and vLLM's weight checkers (test only).

They hold real torch modules, one per tensor-parallel rank, hash the tensors' bytes and
answer with the request and response shapes the adapters follow (see
``docs/integrations.md``): SGLang ``POST /weights_checker`` and vLLM ``POST
/weight_checker``, both with ``{"action": "checksum"}``. They run in a thread of the
test process and listen on a free loopback port.
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


def sha256_hex(t: torch.Tensor) -> str:
    """What vLLM returns per tensor: sha256 of the raw bytes."""
    data = t.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy()
    return hashlib.sha256(data.tobytes()).hexdigest()


def short_hex(t: torch.Tensor) -> str:
    """A 64-bit hex digest, shaped like SGLang's ``f"{tensor_hash(t):016x}"``."""
    return sha256_hex(t)[:16]


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
    """One engine: ``tp * pp`` ranks, each with its own tensors (pp ranks split the names)."""

    kind: Literal["sglang", "vllm"]
    tp: int = 1
    pp: int = 1
    api_key: str | None = None
    legacy: bool = False
    """An SGLang build without the ``checksum`` action: success but no ``ranks``."""
    failure: str | None = None
    """When set, SGLang's checker fails with this message (400, ``success: false``)."""
    ranks: dict[tuple[int, int], dict[str, torch.Tensor]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def load(self, state: Mapping[str, torch.Tensor]) -> None:
        """A weight sync: every rank receives its shard (pipeline stages split the names)."""
        names = sorted(state)
        for p in range(self.pp):
            stage = {n: state[n] for n in names[p :: self.pp]}
            for t in range(self.tp):
                self.ranks[(p, t)] = shard(stage, t, self.tp)

    def load_modules(self, modules: list[nn.Module]) -> None:
        for t, module in enumerate(modules):
            self.ranks[(0, t)] = {k: v.detach().clone() for k, v in module.state_dict().items()}

    def tensor(self, name: str, tp_rank: int = 0, pp_rank: int = 0) -> torch.Tensor:
        return self.ranks[(pp_rank, tp_rank)][name]

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

    def _sglang(self, body: Any) -> tuple[int, Any]:
        action = body.get("action") if isinstance(body, dict) else None
        if action != "checksum":
            return 400, {"success": False, "message": f"Unsupported action={action!r}"}
        if self.failure is not None:
            return 400, {"success": False, "message": self.failure}
        if self.legacy:
            return 200, {"success": True, "message": ""}
        skip = body.get("skip_tensor_list") or []
        infos = []
        for (p, t), tensors in sorted(self.ranks.items()):
            sums = {n: short_hex(v) for n, v in tensors.items() if not any(s in n for s in skip)}
            h = hashlib.sha256()
            for n in sorted(sums):
                h.update(n.encode())
                h.update(sums[n].encode())
            infos.append(
                {
                    "checksums": sums,
                    "per_gpu_checksum": h.hexdigest(),
                    "parallelism_info": {
                        "tp_rank": t,
                        "tp_size": self.tp,
                        "dp_rank": 0,
                        "dp_size": 1,
                        "pp_rank": p,
                        "pp_size": self.pp,
                        "rank": p * self.tp + t,
                        "size": self.tp * self.pp,
                    },
                }
            )
        engine = hashlib.sha256()
        for info in infos:
            engine.update(info["per_gpu_checksum"].encode())
        return 200, {
            "success": True,
            "message": "",
            "ranks": infos,
            "per_engine_checksum": engine.hexdigest(),
        }

    def _vllm(self, body: Any) -> tuple[int, Any]:
        action = body.get("action") if isinstance(body, dict) else None
        if action != "checksum":
            return 400, {"error": f"unknown action {action!r}"}
        sums = {
            f"{t}:{n}": sha256_hex(v)
            for (_, t), tensors in sorted(self.ranks.items())
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
