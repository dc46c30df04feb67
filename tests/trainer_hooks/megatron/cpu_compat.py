"""TEST ONLY: run megatron-core's CUDA-assuming code paths on CPU with gloo.

megatron-core 0.16.1 allocates its gradient and parameter buffers on
``torch.cuda.current_device()``, runs communication on CUDA streams, keeps dropout RNG
states with ``torch.cuda`` generators, and the DistributedOptimizer accepts only
``torch.cuda.*Tensor`` types. Nothing of that is about what these tests check (where the
witness rows live and how they are cleared), so :func:`enable` patches exactly those
calls:

- tensors asked for on a CUDA device (``device="cuda"``, ``.to("cuda")``, ``.cuda()``) are
  made on the CPU (a ``TorchFunctionMode``), and ``torch.cuda.current_device()`` is the CPU,
- ``torch.cuda.synchronize``, ``Stream``, ``stream``, ``current_stream``,
  ``default_stream`` -> no-ops (CPU work is synchronous),
- the CUDA RNG state calls (``torch.cuda.get_rng_state``/``set_rng_state``/``manual_seed``
  and megatron's own wrappers of them) -> the CPU generator's,
- ``torch.Tensor.type()`` without arguments on a CPU tensor -> the name of the CUDA type
  (``torch.cuda.FloatTensor``), which is what the DistributedOptimizer's dtype switch reads.

Production code (``ftaudit.trainer_hooks.megatron``) never imports this module; the GPU
check (``benchmarks/gpu_megatron_check.py``) runs the same tests without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

_ENABLED = False


def _is_cuda(device: Any) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # a bare index means a CUDA device
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, torch.device) and device.type == "cuda"


class _CudaToCpu(TorchFunctionMode):
    """Torch calls that ask for a CUDA device (``device="cuda"``, ``.to("cuda")``) get the CPU."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.to and len(args) > 1 and _is_cuda(args[1]):
            args = (args[0], "cpu", *args[2:])
        return func(*args, **kwargs)


class _NoStream:
    """Stands in for a CUDA stream: waits and records are no-ops on the CPU."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait_stream(self, other: Any) -> None:
        pass

    def wait_event(self, event: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> None:
        return None

    def synchronize(self) -> None:
        pass


@contextlib.contextmanager
def _no_stream(stream: Any = None) -> Iterator[None]:
    yield


def enable() -> None:
    """Patch the CUDA-only calls (idempotent; for the lifetime of the test process)."""
    global _ENABLED
    if _ENABLED:
        return
    _ENABLED = True
    _CudaToCpu().__enter__()  # stays active: these tests never leave the CPU
    # the CPU device itself, not an index: torch function modes are not active inside
    # autograd's backward, where megatron's sequence-parallel linear layers allocate with
    # ``device=torch.cuda.current_device()``
    torch.cuda.current_device = lambda: torch.device("cpu")  # type: ignore[assignment]
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign,assignment]
    torch.cuda.synchronize = lambda device=None: None  # type: ignore[assignment]
    torch.cuda.Stream = _NoStream  # type: ignore[assignment,misc]
    torch.cuda.stream = _no_stream  # type: ignore[assignment]
    torch.cuda.current_stream = lambda device=None: _NoStream()  # type: ignore[assignment]
    torch.cuda.default_stream = lambda device=None: _NoStream()  # type: ignore[assignment]

    # megatron keeps its dropout RNG states as CUDA generator states: use the CPU one's
    torch.cuda.get_rng_state = lambda device="cuda": torch.get_rng_state()  # type: ignore[assignment]
    torch.cuda.set_rng_state = lambda state, device="cuda": torch.set_rng_state(state)  # type: ignore[assignment]
    torch.cuda.manual_seed = lambda seed: torch.default_generator.manual_seed(seed)  # type: ignore[assignment]
    torch.cuda.manual_seed_all = lambda seed: None  # type: ignore[assignment]  # torch.manual_seed calls it

    from megatron.core.tensor_parallel import random as mrandom

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)

    original_type = torch.Tensor.type

    def tensor_type(
        self: torch.Tensor, dtype: Any = None, non_blocking: bool = False, **kw: Any
    ) -> Any:
        if dtype is None and not kw and self.device.type == "cpu":
            name = original_type(self)  # (may come back through the mode already renamed)
            if name.startswith("torch.cuda."):
                return name
            return name.replace("torch.", "torch.cuda.", 1)
        return original_type(self, dtype, non_blocking, **kw)

    torch.Tensor.type = tensor_type  # type: ignore[method-assign,assignment]
