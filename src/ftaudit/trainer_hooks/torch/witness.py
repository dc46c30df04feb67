"""The witness inside the model: a zero embedding whose rows record which samples trained.

A witness adds an exact zero to the hidden stream, so activations and every other
gradient are bitwise unchanged, while its custom backward gives the row of each token's
witness id ``sum over hidden of |upstream grad|``. That is never negative, so gradients
cannot cancel across tokens, ranks or cells: after an optimizer step a row is nonzero iff
its sample's gradient reached the weights.

Installing needs no change to the model's code: forward hooks put a "head" witness at
the input of a layer stack and a "tail" witness at its output, and the per-token witness
ids come through :meth:`WitnessSet.tokens`, not through the model's forward signature.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import torch
from torch import nn

from ftaudit.errors import UsageError

WITNESS_MODULE = "ftaudit_witness"
"""The attribute under which :func:`install_witnesses` registers the witnesses on a model:
their parameters are named ``ftaudit_witness.<chunk>.<end>.weight``."""

Layout = Literal["bsh", "sbh"]
"""``bsh``: hidden is [batch, seq, hidden]; ``sbh``: [seq, batch, hidden] (Megatron)."""


class _WitnessAdd(torch.autograd.Function):
    """Forward: ``hidden`` plus an exact zero. Backward: row ``id`` gets ``sum |grad|``."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, ids: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]
        ctx.weight_dtype = weight.dtype
        # hidden + (w - w.detach()) is hidden + 0.0, which would turn -0.0 into +0.0; a
        # copy is the same value bitwise, sign of zero included
        return hidden.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None, None]:
        grad_weight = None
        if ctx.needs_input_grad[1]:
            (ids,) = ctx.saved_tensors
            per_token = grad.abs().sum(dim=-1, dtype=torch.float32)
            grad_weight = _row_grad(per_token, ids, ctx.rows, ctx.weight_dtype)
        return grad, grad_weight, None


def _row_grad(
    per_token: torch.Tensor, ids: torch.Tensor, rows: int, dtype: torch.dtype
) -> torch.Tensor:
    """The [rows, 1] witness gradient: each token's value added to the row of its id."""
    flat_ids = ids.reshape(-1)
    # ids < 0 mark tokens without a witness (padding); adding 0.0 to row 0 keeps it
    # exact without a device-to-host sync
    valid = flat_ids >= 0
    out = torch.zeros(rows, dtype=torch.float32, device=per_token.device)
    out.index_put_(
        (flat_ids.clamp_min(0),), per_token.reshape(-1) * valid, accumulate=True
    )  # deterministic under torch.use_deterministic_algorithms(True)
    return out.unsqueeze(1).to(dtype)


class _WitnessTokens(torch.autograd.Function):
    """Zeros [*ids.shape, 1] (fp32) whose gradient is added to the rows of ``ids``.

    With sequence parallelism this per-token tensor covers the whole sequence and is
    scattered to the rank's part of it; the scatter's backward gathers the per-token
    gradients, so every tensor-parallel rank gets the rows of the whole sequence.
    """

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(ids)
        ctx.rows = weight.shape[0]
        ctx.weight_dtype = weight.dtype
        return torch.zeros((*ids.shape, 1), dtype=torch.float32, device=ids.device)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, None]:
        if not ctx.needs_input_grad[0]:
            return None, None
        (ids,) = ctx.saved_tensors
        return _row_grad(grad.reshape(ids.shape), ids, ctx.rows, ctx.weight_dtype), None


class _WitnessProbe(torch.autograd.Function):
    """Forward: ``hidden`` bitwise. Backward: ``sum over hidden of |grad|`` to ``tokens``."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return hidden.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        per_token = None
        if ctx.needs_input_grad[1]:
            per_token = grad.abs().sum(dim=-1, keepdim=True, dtype=torch.float32)
        return grad, per_token


TokenRegion = Callable[[torch.Tensor], torch.Tensor]
"""Maps a per-token tensor of the whole sequence ([seq, batch, 1] in ``sbh``) to this
rank's part of the hidden states, differentiably: with Megatron's sequence parallelism,
``scatter_to_sequence_parallel_region`` (whose backward all-gathers)."""


class WitnessEmbedding(nn.Embedding):
    """A zero-initialised ``Embedding(B, 1)``: one row per witness slot."""

    def __init__(
        self,
        buffer_size: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__(buffer_size, 1, device=device, dtype=dtype)
        with torch.no_grad():
            self.weight.zero_()

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.weight)

    def forward(  # type: ignore[override]
        self,
        hidden: torch.Tensor,
        ids: torch.Tensor,
        layout: Layout = "bsh",
        region: TokenRegion | None = None,
    ) -> torch.Tensor:
        """``hidden`` unchanged in value; its backward marks the rows of ``ids``.

        ``ids`` holds one witness id per token, shaped [batch, seq] (or [tokens] for
        packed 2-D hidden states); with ``layout="sbh"`` it is transposed to match. One
        id per sample ([batch], with 3-D hidden states) is given to each of its tokens.
        With ``region`` (sequence parallelism) ``ids`` cover the whole sequence and the
        hidden states only this rank's part; see :data:`TokenRegion`.
        """
        if region is None:
            ids = _align_ids(hidden, ids, layout).to(device=hidden.device, non_blocking=True)
            return _WitnessAdd.apply(hidden, self.weight, ids)
        if layout == "sbh" and ids.dim() == 2:
            ids = ids.transpose(0, 1)
        ids = ids.long().to(device=hidden.device, non_blocking=True)
        local = region(_WitnessTokens.apply(self.weight, ids))
        if tuple(local.shape[:-1]) != tuple(hidden.shape[:-1]):
            raise UsageError(
                f"witness ids of shape {tuple(ids.shape)} give {tuple(local.shape[:-1])} tokens "
                f"in this rank's region, but its hidden states are {tuple(hidden.shape)}"
            )
        return _WitnessProbe.apply(hidden, local)


def _align_ids(hidden: torch.Tensor, ids: torch.Tensor, layout: Layout) -> torch.Tensor:
    if ids.dim() == 1 and hidden.dim() == 3:
        # one id per sample: every token of the sample carries it (a framework callback
        # knows the samples of a batch, not the sequence length of each forward)
        batch_dim = 1 if layout == "sbh" else 0
        if ids.shape[0] == hidden.shape[batch_dim]:
            shape = [1, 1]
            shape[batch_dim] = -1
            ids = ids.reshape(shape).expand(*hidden.shape[:-1])
            return ids.long()
    if layout == "sbh" and ids.dim() == 2:
        ids = ids.transpose(0, 1)
    if tuple(ids.shape) != tuple(hidden.shape[:-1]):
        raise UsageError(
            f"witness ids of shape {tuple(ids.shape)} do not match hidden states of shape "
            f"{tuple(hidden.shape)} in layout {layout!r}: give one id per token, "
            "[batch, seq] (or [tokens] for packed sequences)"
        )
    return ids.long()


class WitnessSet(nn.Module):
    """The witnesses of one model, by instance name (``chunk0.head``), and their ids context.

    It is a module registered on the model (see :func:`install_witnesses`), so its rows
    are parameters: the optimizer updates them, DDP reduces their gradients, and the
    model's ``state_dict`` saves and restores them.
    """

    def __init__(self, buffer_size: int) -> None:
        super().__init__()
        if buffer_size <= 0:
            raise UsageError(f"buffer_size (B) must be positive, got {buffer_size}")
        self.buffer_size = buffer_size
        self._ids: list[torch.Tensor] = []
        self._hooks: list[torch.utils.hooks.RemovableHandle] = []
        self._names: list[str] = []

    # -- instances ---------------------------------------------------------------------

    def add(
        self,
        instance: str,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> WitnessEmbedding:
        """Create the witness named ``instance`` (``<chunk>.<end>``, e.g. ``chunk0.head``)."""
        chunk, _, end = instance.partition(".")
        if not chunk or not end or "." in end:
            raise UsageError(f"witness instance {instance!r} must look like 'chunk0.head'")
        if instance in self._names:
            raise UsageError(f"witness instance {instance!r} already exists")
        group = getattr(self, chunk, None)
        if group is None:
            group = nn.ModuleDict()
            self.add_module(chunk, group)
        witness = WitnessEmbedding(self.buffer_size, device=device, dtype=dtype)
        group[end] = witness
        self._names.append(instance)
        return witness

    def instances(self) -> dict[str, WitnessEmbedding]:
        """Every witness by instance name, in creation order."""
        out: dict[str, WitnessEmbedding] = {}
        for name in self._names:
            chunk, _, end = name.partition(".")
            out[name] = getattr(self, chunk)[end]
        return out

    def attach(
        self,
        module: nn.Module,
        instance: str,
        *,
        at: Literal["input", "output"],
        layout: Layout = "bsh",
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
        region: TokenRegion | None = None,
    ) -> WitnessEmbedding:
        """Add witness ``instance`` on ``module``'s first input or (first) output.

        Works through hooks, so the module's code is untouched; a tuple or list output
        (as many transformer layers return) gets the witness on its first element.
        ``region`` is for sequence parallelism (see :data:`TokenRegion`).
        """
        if device is None:
            device = next((p.device for p in module.parameters()), None)
        witness = self.add(instance, device=device, dtype=dtype)
        if at == "input":
            handle = module.register_forward_pre_hook(
                self._input_hook(witness, layout, region), with_kwargs=True
            )
        elif at == "output":
            handle = module.register_forward_hook(self._output_hook(witness, layout, region))
        else:
            raise UsageError(f"at must be 'input' or 'output', not {at!r}")
        self._hooks.append(handle)
        return witness

    def detach_hooks(self) -> None:
        """Remove every hook (the witness parameters stay, so checkpoints still load)."""
        for handle in self._hooks:
            handle.remove()
        self._hooks.clear()

    # -- the ids context ---------------------------------------------------------------

    @contextmanager
    def tokens(self, ids: torch.Tensor) -> Iterator[torch.Tensor]:
        """Witness ids per token of the batch for forwards (and backwards) run inside.

        Keep the backward inside too when the model recomputes activations
        (activation checkpointing), so the recomputed forward finds the ids.
        """
        if ids.is_floating_point() or ids.is_complex():
            raise TypeError(f"witness ids must be integers, not {ids.dtype}")
        self._ids.append(ids)
        try:
            yield ids
        finally:
            self._ids.pop()

    @property
    def active_ids(self) -> torch.Tensor | None:
        """The innermost ids of :meth:`tokens`, or None outside it."""
        return self._ids[-1] if self._ids else None

    def _apply_to(
        self,
        witness: WitnessEmbedding,
        hidden: Any,
        layout: Layout,
        region: TokenRegion | None = None,
    ) -> tuple[bool, torch.Tensor]:
        ids = self.active_ids
        if ids is None or not torch.is_grad_enabled() or not isinstance(hidden, torch.Tensor):
            return False, hidden  # evaluation or no batch context: nothing to witness
        return True, witness(hidden, ids, layout, region)

    def _input_hook(
        self, witness: WitnessEmbedding, layout: Layout, region: TokenRegion | None = None
    ) -> Any:
        def hook(
            module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
            if args:
                changed, hidden = self._apply_to(witness, args[0], layout, region)
                return ((hidden, *args[1:]), kwargs) if changed else None
            key = next(iter(kwargs), None)  # hidden passed by keyword: the first one
            if key is None:
                return None
            changed, hidden = self._apply_to(witness, kwargs[key], layout, region)
            return (args, {**kwargs, key: hidden}) if changed else None

        return hook

    def _output_hook(
        self, witness: WitnessEmbedding, layout: Layout, region: TokenRegion | None = None
    ) -> Any:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> Any:
            if isinstance(output, tuple | list) and output:
                changed, hidden = self._apply_to(witness, output[0], layout, region)
                return type(output)([hidden, *output[1:]]) if changed else None
            changed, hidden = self._apply_to(witness, output, layout, region)
            return hidden if changed else None

        return hook


def _resolve(model: nn.Module, path: str) -> nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError as exc:
        raise UsageError(f"the model has no submodule {path!r}: {exc}") from None


def _ends(stack: nn.Module) -> tuple[nn.Module, nn.Module]:
    """The modules whose input and output are the stack's input and output."""
    if isinstance(stack, nn.ModuleList):  # never called itself: hook its first and last layer
        if len(stack) == 0:
            raise UsageError("cannot install witnesses on an empty layer list")
        return stack[0], stack[-1]
    return stack, stack


def install_witnesses(
    model: nn.Module,
    buffer_size: int,
    *,
    layers: str | Sequence[str] = "layers",
    layout: Layout = "bsh",
    head: bool = True,
    tail: bool = True,
    dtype: torch.dtype = torch.float32,
) -> WitnessSet:
    """Put a head witness at the input and a tail witness at the output of each layer stack.

    ``layers`` names the layer stack by its dotted path in the model (a ``ModuleList``,
    ``Sequential`` or any module), or one path per model chunk; chunk ``i`` gets the
    instances ``chunk{i}.head`` and ``chunk{i}.tail``. The witnesses are registered on the
    model as ``model.ftaudit_witness``. Call it before wrapping the model in DDP and
    before building the optimizer, so both see the witness parameters.
    """
    if isinstance(model, nn.parallel.DistributedDataParallel):
        raise TypeError("install witnesses before wrapping the model in DistributedDataParallel")
    if hasattr(model, WITNESS_MODULE):
        raise UsageError("this model already has witnesses installed")
    witnesses = WitnessSet(buffer_size)
    paths = [layers] if isinstance(layers, str) else list(layers)
    for i, path in enumerate(paths):
        first, last = _ends(_resolve(model, path))
        if head:
            witnesses.attach(first, f"chunk{i}.head", at="input", layout=layout, dtype=dtype)
        if tail:
            witnesses.attach(last, f"chunk{i}.tail", at="output", layout=layout, dtype=dtype)
    model.add_module(WITNESS_MODULE, witnesses)
    return witnesses


def find_witnesses(model: nn.Module) -> WitnessSet:
    """The witnesses installed on ``model`` (looking through DDP / FSDP-style wrappers)."""
    for module in model.modules():
        if isinstance(module, WitnessSet):
            return module
    raise UsageError("no witnesses installed on this model: call install_witnesses first")


def is_witness_name(name: str) -> bool:
    """True for state-dict keys of witness parameters (to skip them in weight sync)."""
    return WITNESS_MODULE in name.split(".")


def without_witnesses(state_dict: dict[str, Any]) -> dict[str, Any]:
    """A state dict without the witness rows: what to send to inference engines."""
    return {k: v for k, v in state_dict.items() if not is_witness_name(k)}


def sample_token_ids(sample_ids: Sequence[int] | torch.Tensor, seq_len: int) -> torch.Tensor:
    """Per-token ids [batch, seq] for a padded batch: every token carries its sample's id."""
    ids = torch.as_tensor(sample_ids, dtype=torch.long)
    return ids.reshape(-1, 1).expand(-1, seq_len)


def packed_token_ids(
    sample_ids: Sequence[int] | torch.Tensor, lengths: Sequence[int] | torch.Tensor
) -> torch.Tensor:
    """Per-token ids [tokens] for packed sequences of the given lengths."""
    ids = torch.as_tensor(sample_ids, dtype=torch.long)
    return torch.repeat_interleave(ids, torch.as_tensor(lengths, dtype=torch.long))
