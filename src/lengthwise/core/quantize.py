"""int8 on the CPU: dynamic quantization of a model's `nn.Linear` layers, applied at load in well under a second.

Weights are quantized per output channel ahead of time; activations are quantized per row (per token) at run time:
each quantized layer is wrapped in `RowScaledLinear`, which scales every row of its input to the same range before
torch's dynamic int8 Linear (`torch.ao.quantization.quantize_dynamic` with `per_channel_dynamic_qconfig`) and
scales the output back. Torch quantizes activations per tensor, over the whole padded batch, so a text's vector
depended on its batch-mates (cosine 0.987 between a sentence encoded alone and beside seven long ones, issue
33.4b); with every row at the same range, and two fixed "fence" rows pinning the tensor's range, each row is
quantized by its own scale whatever else is in the batch. Rows use half of the 8-bit range (7 bits, as torch's
``reduce_range``): at the full range the u8×s8 pair sums saturate int16 in some of the CPU kernels (AVX2 without
VNNI), and which kernel runs depends on the number of rows. Everything else — embeddings,
LayerNorm, attention softmax, pooling — stays fp32, so elongated and windowed inputs, TempScale (which patches
attention, not the Linear layers), the long-document encoder and mteb keep working unchanged.

Which Linear layers stay fp32 (`keep_fp32`, shell-style patterns on module names inside the transformer) was
chosen by measurement (`benchmarks/encode/precision.py`, docs/benchmarks.md "int8 on the CPU"). torchao's
int8 dynamic-activation path was measured too and was slower than fp32 on this CPU, so torch's own path is used;
its deprecation warnings are filtered here by message, not wholesale.

The weights are packed for oneDNN where torch has it (`QUANTIZED_ENGINES` gives the order). The packed weights
carry their kernel, so the choice is made once, at quantization, and torch's process-wide
`torch.backends.quantized.engine` is restored afterwards. On this project's AVX2 CPU without VNNI, before the row
scaling, the default set ran 1.32–1.48× faster than fp32 at 128 tokens, one thread, on oneDNN (two runs), against
1.22–1.38× on the fbgemm-based `x86` engine (torch's default). The row scaling's elementwise passes take most of
that back (1.03–1.07× against 1.20–1.27× per batch, on a slower host; docs/benchmarks.md "int8 on the CPU").
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError
from lengthwise.core.precision import transformer_module

__all__ = [
    "DEFAULT_KEEP_FP32",
    "QUANTIZED_ENGINES",
    "RowScaledLinear",
    "linear_precision",
    "quantize_int8",
    "quantized_engine",
]

# Linear layers left in fp32 by default (chosen on STS-B test by bench_precision.py; see the module docstring).
DEFAULT_KEEP_FP32: tuple[str, ...] = ("*.output.dense",)

# Quantized engines to pack the int8 weights for, best first; the first one this torch build supports is used.
QUANTIZED_ENGINES: tuple[str, ...] = ("onednn", "x86", "fbgemm")

_LINEAR_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16"}  # a half Linear's weights; anything else is fp32

# torch marks the eager quantization API as moving to torchao; torchao's int8 path is slower on CPU (measured).
_UPSTREAM_WARNINGS = (
    r"torch\.ao\.quantization is deprecated",
    r"torch\.quantize_per_tensor, torch\.quantize_per_channel",
)


class RowScaledLinear(torch.nn.Module):
    """A dynamic int8 Linear whose activations are quantized per row: row r enters as ``x_r / s_r`` with
    ``s_r = max|x_r| / 63.5``, beside two fence rows at ±127 that fix the per-tensor range torch quantizes with, and
    leaves as ``y_r · s_r + b`` (the bias is taken out of the int8 layer and added here). A row's output so depends
    on that row alone (see the module docstring). The scaling runs in two passes over the input and two in place
    over the output: elementwise passes are not free beside an int8 GEMM (docs/benchmarks.md)."""

    HALF = 63.5  # rows fill half the fenced range: 7-bit activations, no int16 saturation in any kernel

    bias: torch.Tensor
    fence: torch.Tensor

    def __init__(self, inner: Any) -> None:  # a torch.ao.nn.quantized.dynamic.Linear
        super().__init__()
        bias = inner.bias()
        self.register_buffer("bias", bias.detach().clone() if bias is not None else torch.zeros(inner.out_features))
        inner.set_weight_bias(inner.weight(), None)
        self.inner = inner
        fence = torch.tensor([[2 * self.HALF], [-2 * self.HALF]]).expand(2, int(inner.in_features)).contiguous()
        self.register_buffer("fence", fence)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        count = rows.shape[0]
        low, high = torch.aminmax(rows, dim=1, keepdim=True)
        scale = torch.maximum(high, low.neg()).clamp_min_(torch.finfo(rows.dtype).tiny).div_(self.HALF)
        scaled = torch.empty((count + 2, rows.shape[1]), dtype=rows.dtype)
        torch.div(rows, scale, out=scaled[:count])
        scaled[count:] = self.fence
        out = self.inner(scaled)[:count]
        out.mul_(scale).add_(self.bias)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def _row_scaled(network: torch.nn.Module, names: Sequence[str]) -> None:
    """Wrap each quantized Linear of `network` named in `names` in a `RowScaledLinear`, in place."""
    for name in names:
        parent_name, _, child = name.rpartition(".")
        parent = network.get_submodule(parent_name) if parent_name else network
        setattr(parent, child, RowScaledLinear(getattr(parent, child)))


def quantized_engine() -> str:
    """The quantized engine `quantize_int8` packs weights for here: the first of `QUANTIZED_ENGINES` this torch
    build supports (else torch's current one)."""
    supported = torch.backends.quantized.supported_engines
    return next((e for e in QUANTIZED_ENGINES if e in supported), torch.backends.quantized.engine)


def quantize_int8(
    model: SentenceTransformer, keep_fp32: Sequence[str] = DEFAULT_KEEP_FP32, *, engine: str | None = None
) -> list[str]:
    """Quantize `model`'s Linear layers to int8 in place, except those matching `keep_fp32`; return their names.

    Args:
        model: A loaded model on the CPU (int8 dynamic quantization has CPU kernels only).
        keep_fp32: Shell-style patterns on module names inside the transformer (e.g. ``"encoder.layer.5.*"``,
            ``"*.attention.output.dense"``); matching Linear layers stay fp32.
        engine: The quantized engine to pack the weights for (default: `quantized_engine()`), e.g. ``"x86"`` to
            measure torch's default beside it.

    Returns:
        The names of the quantized Linear layers.

    Raises:
        SettingError: on a model that is not on the CPU (``precision``), or when no Linear layer is left to quantize.
    """
    if model.device.type != "cpu":
        raise SettingError(
            "precision",
            "int8",
            f"int8 runs on the CPU only (the model is on {model.device}); on a GPU use bf16 or fp16",
        )
    network = transformer_module(model, "int8")
    names = [
        name
        for name, module in network.named_modules()
        if type(module) is torch.nn.Linear and not any(fnmatch.fnmatchcase(name, p) for p in keep_fp32)
    ]
    if not names:
        raise SettingError("keep_fp32", list(keep_fp32), "leaves no Linear layer to quantize")
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    previous = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = engine or quantized_engine()  # the packed weights keep its kernel
        with warnings.catch_warnings():
            for message in _UPSTREAM_WARNINGS:
                warnings.filterwarnings("ignore", message=message)
            quantize_dynamic(network, dict.fromkeys(names, per_channel_dynamic_qconfig), inplace=True)
    finally:
        torch.backends.quantized.engine = previous
    _row_scaled(network, names)
    return names


def linear_precision(model: torch.nn.Module) -> dict[str, int]:
    """How many Linear layers compute in int8 and how many in fp32, read from the modules themselves; a model cast
    to half precision (`lengthwise.core.precision.cast_half`) counts its Linear layers under ``bf16`` or ``fp16``
    instead (those keys appear only when non-zero, so an fp32 or int8 record is as before)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    modules = list(model.modules())
    counts = {"int8": sum(isinstance(m, DynamicLinear) for m in modules), "fp32": 0}
    for module in modules:
        if type(module) is torch.nn.Linear:
            name = _LINEAR_DTYPES.get(module.weight.dtype, "fp32")
            counts[name] = counts.get(name, 0) + 1
    return counts
