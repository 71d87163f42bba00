"""int8 on the CPU: dynamic quantization of a model's `nn.Linear` layers, applied at load in well under a second.

Weights are quantized per output channel ahead of time; activations are quantized per batch at run time
(`torch.ao.quantization.quantize_dynamic` with `per_channel_dynamic_qconfig`). Everything else — embeddings,
LayerNorm, attention softmax, pooling — stays fp32, so elongated and windowed inputs, TempScale (which patches
attention, not the Linear layers), the long-document encoder and mteb keep working unchanged.

Which Linear layers stay fp32 (`keep_fp32`, shell-style patterns on module names inside the transformer) was
chosen by measurement (`benchmarks/bench_precision.py`, docs/benchmarks.md "int8 on the CPU"). torchao's
int8 dynamic-activation path was measured too and was slower than fp32 on this CPU, so torch's own path is used;
its deprecation warnings are filtered here by message, not wholesale.

The weights are packed for oneDNN where torch has it (`QUANTIZED_ENGINES` gives the order). The packed weights
carry their kernel, so the choice is made once, at quantization, and torch's process-wide
`torch.backends.quantized.engine` is restored afterwards. On this project's AVX2 CPU without VNNI, the default
set ran 1.32–1.48× faster than fp32 at 128 tokens, one thread, on oneDNN (two runs), against 1.22–1.38× on the
fbgemm-based `x86` engine (torch's default), with the same STS-B score (docs/benchmarks.md).
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Sequence
from enum import Enum

import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError

__all__ = [
    "DEFAULT_KEEP_FP32",
    "QUANTIZED_ENGINES",
    "Precision",
    "linear_precision",
    "quantize_int8",
    "quantized_engine",
]

# Linear layers left in fp32 by default (chosen on STS-B test by bench_precision.py; see the module docstring).
DEFAULT_KEEP_FP32: tuple[str, ...] = ("*.output.dense",)

# Quantized engines to pack the int8 weights for, best first; the first one this torch build supports is used.
QUANTIZED_ENGINES: tuple[str, ...] = ("onednn", "x86", "fbgemm")

# torch marks the eager quantization API as moving to torchao; torchao's int8 path is slower on CPU (measured).
_UPSTREAM_WARNINGS = (
    r"torch\.ao\.quantization is deprecated",
    r"torch\.quantize_per_tensor, torch\.quantize_per_channel",
)


class Precision(str, Enum):
    """The numbers a model computes with at inference: fp32, or int8 Linear layers on the CPU."""

    FP32 = "fp32"
    INT8 = "int8"

    @classmethod
    def parse(cls, value: str | Precision) -> Precision:
        try:
            return cls(str(value.value if isinstance(value, Precision) else value).lower())
        except ValueError:
            raise SettingError("precision", value, "use fp32 or int8") from None


def _transformer(model: SentenceTransformer) -> torch.nn.Module:
    first = model[0]
    inner = getattr(first, "auto_model", None) or getattr(first, "model", None)
    if not isinstance(inner, torch.nn.Module):
        raise SettingError("precision", "int8", f"no transformer found in {type(first).__name__}; use fp32")
    return inner


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
            f"int8 runs on the CPU only (the model is on {model.device}); on a GPU use fp16 or bf16",
        )
    network = _transformer(model)
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
    return names


def linear_precision(model: torch.nn.Module) -> dict[str, int]:
    """How many Linear layers compute in int8 and how many in fp32 (read from the modules themselves)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    modules = list(model.modules())
    return {
        "int8": sum(isinstance(m, DynamicLinear) for m in modules),
        "fp32": sum(type(m) is torch.nn.Linear for m in modules),
    }
