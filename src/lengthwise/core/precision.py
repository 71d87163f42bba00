"""The numbers a model computes with at inference: fp32, bf16 or fp16 (the transformer cast), or int8 (`core.quantize`).

`Precision` is the one vocabulary (``auto``, ``fp32``, ``bf16``, ``fp16``, ``int8``); `resolve_precision` turns it
into what runs on a device, refusing in one line what the device runs slowly or not at all; `cast_half` applies bf16
or fp16 to a loaded model; `model_precision` reads back from the modules what a model computes with (provenance).

How half precision is applied, and why: the transformer inside the `SentenceTransformer` (``model[0]``'s Hugging Face
model) is cast with ``.to(dtype)``, as sentence-transformers' own ``model_kwargs={"torch_dtype": ...}`` and
``model.half()`` do, and forward hooks (on sentence-transformers' module and on the Hugging Face model) turn its
floating outputs (the token embeddings; hidden states and attention maps when asked) back to fp32. Pooling, any Dense
layer and normalisation so run in fp32 as before, and every caller — `SentenceTransformer.encode`,
`lengthwise.core.embed.forward_batches` with or without per-layer states, mteb — gets fp32 vectors, unit-length where
the model normalises, with no change to its own code. Casting the weights, rather than `torch.autocast` around each
call, needs no context at every call site (there are several), halves the weights' memory, and ran faster than autocast
on this project's AMX CPU (docs/benchmarks.md "Half precision"). TempScale changes attention's ``scaling`` float or
divides the query projection's output by t in a hook, in the output's own dtype, so a patch works the same on a half
model, applied before the cast or after it.

On a CPU, bf16 is allowed where the CPU has native bf16 instructions (AMX or AVX512-BF16) and fp16 where oneDNN has
native fp16 (AVX512-FP16, AMX-FP16); elsewhere torch emulates them several times slower than fp32 (bf16 0.15–0.21×
fp32 on an AVX2 host, docs/benchmarks.md), so they are refused, naming what to use. ``auto`` is bf16 on a CUDA GPU
that has it (else fp16), bf16 on a CPU with native bf16 (AMX or AVX512-BF16: several times fp32's speed on both,
measured at 32 to 256 tokens; docs/benchmarks.md "Half precision"), else fp32.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from enum import Enum
from typing import Any

import torch
from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError

__all__ = [
    "HALF_DTYPES",
    "Precision",
    "cast_half",
    "cpu_half_support",
    "device_type",
    "model_precision",
    "resolve_precision",
    "resolve_query_precision",
    "transformer_module",
]


class Precision(str, Enum):
    """The numbers a model computes with at inference: ``auto`` (the device's best, `resolve_precision`), fp32, bf16
    or fp16 (the transformer in half precision; vectors stay fp32), or int8 Linear layers on the CPU."""

    AUTO = "auto"
    FP32 = "fp32"
    BF16 = "bf16"
    FP16 = "fp16"
    INT8 = "int8"

    @classmethod
    def parse(cls, value: str | Precision) -> Precision:
        """The precision `value` names (any case); a `SettingError` on ``precision`` naming the choices."""
        try:
            return cls(str(value.value if isinstance(value, Precision) else value).strip().lower())
        except ValueError:
            raise SettingError("precision", value, "use auto, fp32, bf16, fp16 or int8") from None


HALF_DTYPES: dict[Precision, torch.dtype] = {Precision.BF16: torch.bfloat16, Precision.FP16: torch.float16}
_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _cpu_flag(name: str) -> bool:
    """One of torch's CPU feature checks (`torch.cpu._is_amx_tile_supported`, ...); False where this torch lacks it."""
    check: Callable[[], bool] | None = getattr(torch.cpu, name, None)
    return bool(check()) if callable(check) else False


def cpu_half_support() -> dict[str, bool]:
    """Which half precisions this CPU runs natively: ``bf16`` (AMX or AVX512-BF16: where ``auto`` picks bf16 on a
    CPU), ``fp16`` (oneDNN's native fp16: AVX512-FP16 or AMX-FP16), and ``amx`` (AMX tiles)."""
    amx = _cpu_flag("_is_amx_tile_supported")
    fp16 = _cpu_flag("_is_amx_fp16_supported")
    if not fp16 and torch.backends.mkldnn.is_available():
        fp16 = bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    return {"bf16": amx or _cpu_flag("_is_avx512_bf16_supported"), "fp16": fp16, "amx": amx}


def device_type(device: str | torch.device | None) -> str:
    """The torch device type `device` names; None is the best available (cuda, mps, else cpu), as models load."""
    if device is None:
        return "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    return torch.device(device).type


def _auto(kind: str, device: str | torch.device | None) -> Precision:
    if kind == "cuda":
        return Precision.BF16 if torch.cuda.is_bf16_supported() else Precision.FP16
    if kind == "cpu" and cpu_half_support()["bf16"]:  # AMX or AVX512-BF16: both run bf16 several times fp32's speed
        return Precision.BF16
    return Precision.FP32


def _check_on(wanted: Precision, kind: str, device: str | torch.device | None) -> None:
    """Refuse `wanted` on a device of type `kind` where it cannot run, or runs slower than fp32."""
    if wanted is Precision.INT8 and kind != "cpu":
        raise SettingError("precision", "int8", f"int8 runs on the CPU only, not {device}; on a GPU use bf16 or fp16")
    if kind != "cpu" or wanted not in HALF_DTYPES or cpu_half_support()[wanted.value]:
        return
    if wanted is Precision.BF16:
        problem = "this CPU has no native bf16 (AMX or AVX512-BF16) and emulates it several times slower than fp32"
        raise SettingError("precision", "bf16", f"{problem}; use fp32, or int8")
    native = "; use bf16, which this CPU has" if cpu_half_support()["bf16"] else "; use fp32, or int8"
    problem = "this CPU has no native fp16 (AVX512-FP16 or AMX-FP16) and emulates it slower than fp32"
    raise SettingError("precision", "fp16", problem + native)


def resolve_precision(precision: str | Precision, *devices: str | torch.device | None) -> Precision:
    """What `precision` runs as on `devices` (None: the best available): ``auto`` made concrete, and refused in one
    line where a device runs it slowly or not at all.

    Args:
        precision: ``auto``, ``fp32``, ``bf16``, ``fp16`` or ``int8`` (any case), or a `Precision`.
        devices: The torch devices the model will run on; several (one process each) must agree on ``auto``.

    Returns:
        The concrete `Precision` (never ``AUTO``).

    Raises:
        SettingError: on ``precision``: an unknown name, int8 off the CPU, bf16/fp16 on a CPU without native
            support, or ``auto`` meaning different precisions on the devices given.

    Example:
        >>> resolve_precision("FP32", "cpu")
        <Precision.FP32: 'fp32'>
    """
    wanted = Precision.parse(precision)
    found: dict[Precision, str] = {}
    for device in devices or (None,):
        kind = device_type(device)
        concrete = _auto(kind, device) if wanted is Precision.AUTO else wanted
        _check_on(concrete, kind, device if device is not None else kind)
        found.setdefault(concrete, str(device if device is not None else kind))
    if len(found) > 1:
        means = " but ".join(f"{p.value} on {d}" for p, d in found.items())
        raise SettingError("precision", wanted.value, f"means {means}; name one precision")
    return next(iter(found))


def resolve_query_precision(
    precision: str | Precision, recorded: str | Precision, device: str | torch.device | None = None
) -> Precision:
    """What queries run at on `device` for an index whose documents were embedded at `recorded`: as
    `resolve_precision`, except that ``auto`` on a CPU means `recorded`. On a CPU each half-precision query is its own
    forward (so that its vector does not depend on its batch-mates), which costs more than fp32 queries in batches
    even where the CPU has native bf16 (docs/serving.md, "Measured"); on a GPU ``auto`` is bf16 (else fp16).

    Example:
        >>> resolve_query_precision("auto", "fp32", "cpu")
        <Precision.FP32: 'fp32'>
    """
    if Precision.parse(precision) is Precision.AUTO and device_type(device) == "cpu":
        return Precision.parse(recorded)
    return resolve_precision(precision, device)


def transformer_module(model: SentenceTransformer, precision: str) -> torch.nn.Module:
    """The Hugging Face model inside `model` (``model[0].auto_model``); a `SettingError` on ``precision`` (naming
    `precision`) when there is none to change."""
    first = model[0]
    inner = getattr(first, "auto_model", None) or getattr(first, "model", None)
    if not isinstance(inner, torch.nn.Module):
        raise SettingError("precision", precision, f"no transformer found in {type(first).__name__}; use fp32")
    return inner


def _fp32(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float32:
        return value.float()
    if isinstance(value, tuple | list):
        return type(value)(_fp32(item) for item in value)
    return value


def _fp32_outputs(module: torch.nn.Module, args: Any, output: Any) -> Any:
    """Forward hook: the floating outputs as fp32. On the sentence-transformers module a features dict
    (``token_embeddings``, ``all_layer_embeddings``); on the Hugging Face model, called directly, a ModelOutput (a
    dict whose items are its attributes too) or a tuple."""
    if not isinstance(output, MutableMapping):
        return _fp32(output)
    for key in list(output.keys()):
        output[key] = _fp32(output[key])
    return output


def cast_half(model: SentenceTransformer, precision: str | Precision) -> SentenceTransformer:
    """Run `model`'s transformer in bf16 or fp16, in place; its outputs, and so the pooled vectors, stay fp32.

    Args:
        model: A loaded model, on the device it will run on.
        precision: ``bf16`` or ``fp16``.

    Returns:
        `model`, for chaining.

    Raises:
        SettingError: on ``precision`` when it is not bf16 or fp16, or the model has no transformer to cast.
    """
    wanted = Precision.parse(precision)
    if wanted not in HALF_DTYPES:
        raise SettingError("precision", wanted.value, "cast_half takes bf16 or fp16")
    network = transformer_module(model, wanted.value)
    network.to(HALF_DTYPES[wanted])
    # sentence-transformers calls the Hugging Face model's ``forward`` itself, past its hooks: the hook on its own
    # module covers that path, the one on the Hugging Face model a direct call (per-layer states)
    for module in (model[0], network):
        if _fp32_outputs not in module._forward_hooks.values():  # one hook each, however often cast_half is called
            module.register_forward_hook(_fp32_outputs)
    return model


def model_precision(model: SentenceTransformer) -> str:
    """What `model` computes with, read from its modules: ``int8`` when any Linear layer is quantized, else the
    dtype of its transformer's weights (``fp32``, ``bf16`` or ``fp16``)."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

    if any(isinstance(m, DynamicLinear) for m in model.modules()):
        return "int8"
    first = model[0]
    inner = getattr(first, "auto_model", None) or getattr(first, "model", None) or first
    dtype = next((p.dtype for p in inner.parameters() if p.is_floating_point()), torch.float32)
    return _DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))
