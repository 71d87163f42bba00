"""TempScale (METHODS §2): divide every self-attention logit by a temperature t, at no run-time cost.

``softmax(QKᵀ/(√d·t) + mask)`` equals scaling the queries by 1/t, so the patch never replaces an attention
function and SDPA / flash attention stay on. A scalar t on BERT, RoBERTa, XLM-R and DistilBERT changes the
modules' ``scaling`` attribute (passed to every attention backend); MPNet, ModernBERT and length schedules
divide the query projection's output in a forward hook, per sequence, with the lengths read from the
attention mask. Query and document temperatures are picked per call from sentence-transformers' ``task``.
MPNet's relative position bias is divided by t too (``scale_position_bias``): the paper's
``softmax((QKᵀ/√d + bias)/t)``. Every patch is removable and restores the exact original state; any other
architecture raises `TempScaleError` naming the supported ones.
"""

from __future__ import annotations

import importlib
import itertools
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from torch import nn

from lengthwise.encoder import SentenceTransformerEncoder

__all__ = [
    "FAMILIES",
    "SETTINGS_FILE",
    "Family",
    "LengthSchedule",
    "TempScaleConfig",
    "TempScaleEncoder",
    "TempScaleError",
    "TempScalePatch",
    "apply_saved_tempscale",
    "apply_tempscale",
    "bake_refusal",
    "bake_tempscale",
    "current_tempscale",
    "detect_family",
    "read_tempscale_settings",
    "remove_tempscale",
    "save_tempscale",
    "tempscale",
]

SETTINGS_FILE = "lengthwise_tempscale.json"
_ATTRIBUTE = "lengthwise_tempscale"  # where a model keeps its live patch
Role = Literal["symmetric", "query", "document"]


class TempScaleError(ValueError):
    """TempScale cannot be applied or baked as asked; the message says why and what to do."""


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise TempScaleError(f"{name} = {value} is not a positive finite temperature; use e.g. 0.8")
    return value


@dataclass(frozen=True)
class LengthSchedule:
    """Temperature factor s(n) for a sequence of n tokens (attended tokens, special tokens included).

    Piecewise-linear through the knots ``(lengths[i], factors[i])``, constant before the first and after
    the last. The effective temperature is ``t_role · s(n)``, so with t = 1 the factors are temperatures.
    """

    lengths: tuple[float, ...]
    factors: tuple[float, ...]

    def __post_init__(self) -> None:
        lengths, factors = tuple(float(x) for x in self.lengths), tuple(float(x) for x in self.factors)
        if not lengths or len(lengths) != len(factors):
            raise TempScaleError("length schedule needs as many factors as lengths (at least one knot)")
        if any(b <= a for a, b in itertools.pairwise(lengths)) or lengths[0] < 1:
            raise TempScaleError(f"schedule lengths {lengths} must be ≥ 1 and strictly increasing")
        for factor in factors:
            _positive("schedule factor", factor)
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "factors", factors)

    @classmethod
    def parse(cls, text: str) -> LengthSchedule:
        """``"64:1.0,512:0.7"`` (length:factor pairs) → a schedule; raises naming the expected form."""
        knots = [item.split(":") for item in text.split(",") if item.strip()]
        try:
            if not knots or any(len(knot) != 2 for knot in knots):
                raise ValueError(text)
            lengths, factors = tuple(float(k[0]) for k in knots), tuple(float(k[1]) for k in knots)
        except ValueError:
            raise TempScaleError(
                f"schedule {text!r} is not LENGTH:FACTOR pairs, e.g. --schedule 64:1.0,512:0.7"
            ) from None
        return cls(lengths, factors)

    def __call__(self, n: torch.Tensor) -> torch.Tensor:
        """Factors for token counts n: (B,) → (B,) float32, on n's device (no host sync)."""
        x = n.to(torch.float32)
        xp = torch.tensor(self.lengths, dtype=torch.float32, device=n.device)  # (K,)
        fp = torch.tensor(self.factors, dtype=torch.float32, device=n.device)  # (K,)
        if len(self.lengths) == 1:
            return fp.expand_as(x).clone()
        right = torch.searchsorted(xp, x).clamp(1, len(self.lengths) - 1)  # (B,)
        x0, x1, f0, f1 = xp[right - 1], xp[right], fp[right - 1], fp[right]
        weight = ((x - x0) / (x1 - x0)).clamp(0.0, 1.0)
        return f0 + weight * (f1 - f0)


@dataclass(frozen=True)
class TempScaleConfig:
    """Temperatures: `t` for symmetric `encode`, `t_query` / `t_doc` for the retrieval sides (default t),
    an optional length `schedule` multiplying all of them, and whether MPNet's position bias is scaled."""

    t: float = 1.0
    t_query: float | None = None
    t_doc: float | None = None
    schedule: LengthSchedule | None = None
    scale_position_bias: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "t", _positive("t", self.t))
        for name in ("t_query", "t_doc"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _positive(name, value))
        if self.schedule is not None and not isinstance(self.schedule, LengthSchedule):
            raise TempScaleError("schedule must be a LengthSchedule (or None)")

    def temperature(self, role: Role) -> float:
        """The scalar temperature of a role, before the length schedule."""
        if role == "query" and self.t_query is not None:
            return self.t_query
        if role == "document" and self.t_doc is not None:
            return self.t_doc
        return self.t

    @property
    def is_symmetric(self) -> bool:
        """One temperature for every role (what a single set of baked weights can hold)."""
        return self.temperature("query") == self.temperature("document") == self.t

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TempScaleConfig:
        unknown = set(data) - {"t", "t_query", "t_doc", "schedule", "scale_position_bias"}
        if unknown:
            raise TempScaleError(f"unknown TempScale settings {sorted(unknown)}; was the file written by lengthwise?")
        schedule = data.get("schedule")
        fields = {**data, "schedule": LengthSchedule(**schedule) if schedule else None}
        return cls(**fields)


@dataclass(frozen=True)
class Family:
    """How one architecture's self-attention is reached: the module class and its query projection."""

    name: str
    model_types: tuple[str, ...]
    attention_class: str  # under transformers.models, e.g. "bert.modeling_bert.BertSelfAttention"
    query: str  # attribute of the attention module holding the query projection (nn.Linear)
    fused_qkv: bool = False  # query = the first third of the projection's output (ModernBERT's Wqkv)
    scaling_attribute: bool = True  # the module keeps `scaling`, passed to every attention backend
    position_bias: str | None = None  # the model's relative position bias (an nn.Embedding), if any
    positions: str = "absolute"


FAMILIES: tuple[Family, ...] = (  # attention classes under transformers.models
    Family("BERT", ("bert",), "bert.modeling_bert.BertSelfAttention", "query"),
    Family("RoBERTa", ("roberta",), "roberta.modeling_roberta.RobertaSelfAttention", "query"),
    Family("XLM-R", ("xlm-roberta",), "xlm_roberta.modeling_xlm_roberta.XLMRobertaSelfAttention", "query"),
    Family("DistilBERT", ("distilbert",), "distilbert.modeling_distilbert.DistilBertSelfAttention", "q_lin"),
    Family(
        "MPNet",
        ("mpnet",),
        "mpnet.modeling_mpnet.MPNetSelfAttention",
        "q",
        scaling_attribute=False,
        position_bias="encoder.relative_attention_bias",
        positions="relative bias (added after √d scaling)",
    ),
    Family(
        "ModernBERT",
        ("modernbert",),
        "modernbert.modeling_modernbert.ModernBertAttention",
        "Wqkv",
        fused_qkv=True,
        scaling_attribute=False,
        positions="rotary (RoPE)",
    ),
)


def _supported() -> str:
    return ", ".join(f"{f.name} ({'/'.join(f.model_types)})" for f in FAMILIES)


def _import_class(dotted: str) -> type:
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(f"transformers.models.{module}"), name)


def detect_family(model: SentenceTransformer) -> tuple[Family, nn.Module, list[nn.Module]]:
    """The model's family, its Hugging Face model and its self-attention modules, in layer order.

    Raises `TempScaleError` naming the supported families for anything else, so TempScale is never a no-op.
    """
    first = model[0] if len(model) else None
    hf_model = getattr(first, "auto_model", None)
    config = getattr(hf_model, "config", None)
    if not isinstance(hf_model, nn.Module) or config is None:
        raise TempScaleError(
            f"TempScale needs a SentenceTransformer whose first module is a Transformer; got {type(first).__name__}"
        )
    model_type = getattr(config, "model_type", None)
    family = next((f for f in FAMILIES if model_type in f.model_types), None)
    if family is None:
        raise TempScaleError(
            f"TempScale does not support {type(hf_model).__name__} (model type {model_type!r}); "
            f"supported: {_supported()}"
        )
    attention_class = _import_class(family.attention_class)
    attentions = [m for m in hf_model.modules() if isinstance(m, attention_class)]
    cross = [type(m).__name__ for m in hf_model.modules() if "CrossAttention" in type(m).__name__]
    layers = getattr(config, "num_hidden_layers", None)
    if cross or not attentions or (layers is not None and len(attentions) != layers):
        raise TempScaleError(
            f"{type(hf_model).__name__}: found {len(attentions)} {attention_class.__name__} modules for {layers} "
            f"layers{' and cross-attention' if cross else ''}; TempScale supports plain {family.name} encoders"
        )
    for attention in attentions:
        projection = getattr(attention, family.query, None)
        if type(projection) is not nn.Linear:
            raise TempScaleError(
                f"{family.name} query projection is {type(projection).__name__}, not a plain Linear "
                "(a PEFT adapter?); merge adapters before TempScale"
            )
    return family, hf_model, attentions


def _scaling(attention: nn.Module) -> float:
    return float(vars(attention)["scaling"])  # a plain float attribute, read by every attention backend


def _set_scaling(attention: nn.Module, value: float) -> None:
    vars(attention)["scaling"] = value


class TempScalePatch:
    """A TempScale applied to one model: the hooks and attribute changes, and how to undo them exactly.

    A pre-hook on the `SentenceTransformer` reads each call's role from sentence-transformers' own ``task``
    argument (``encode_query`` → query, ``encode_document`` → document, else symmetric; `role_override`
    wins) and the sequence lengths from ``features["attention_mask"]``; a post-hook puts back the symmetric t.
    """

    def __init__(self, model: SentenceTransformer, config: TempScaleConfig) -> None:
        self.family, _, self.attentions = detect_family(model)
        self.model, self.config = model, config
        self.role_override: Role | None = None
        self.query_hooks = config.schedule is not None or not self.family.scaling_attribute
        self._current: float | torch.Tensor | None = None  # this call's temperature: scalar or (B,)
        self._original_scaling = [_scaling(m) for m in self.attentions] if self.family.scaling_attribute else []
        self._handles = [
            model.register_forward_pre_hook(self._before, with_kwargs=True),
            model.register_forward_hook(self._after, always_call=True),
        ]
        if self.query_hooks:
            self._handles += [
                getattr(m, self.family.query).register_forward_hook(self._scale_query) for m in self.attentions
            ]
        if self.family.position_bias is not None and config.scale_position_bias:
            self._handles += [m.register_forward_pre_hook(self._scale_bias, with_kwargs=True) for m in self.attentions]
        self._set("symmetric", None)

    def _set(self, role: Role, lengths: torch.Tensor | None) -> None:
        t = self.config.temperature(role)
        if self.config.schedule is None:
            self._current = t
        else:  # without lengths (a direct call of the inner model) the query hook refuses to guess
            self._current = None if lengths is None else t * self.config.schedule(lengths)  # (B,)
        if not self.query_hooks:
            for attention, original in zip(self.attentions, self._original_scaling, strict=True):
                _set_scaling(attention, original / t)

    def _before(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:
        task = kwargs.get("task")
        role: Role = "query" if task == "query" else "document" if task == "document" else "symmetric"
        features = args[0] if args else kwargs.get("input", {})
        mask = features.get("attention_mask") if isinstance(features, Mapping) else None  # a BatchEncoding
        lengths = mask.sum(dim=-1) if isinstance(mask, torch.Tensor) and mask.dim() == 2 else None  # (B,)
        self._set(self.role_override or role, lengths)

    def _after(self, module: nn.Module, args: tuple, output: Any) -> None:
        self._set("symmetric", None)

    def _temperature_view(self, like: torch.Tensor, fused: bool) -> torch.Tensor | float:
        """This call's temperature, broadcastable to `like` (B, T, C) or (B, H, T, T); fused: only C[:C/3]."""
        t = self._current
        if t is None:
            raise TempScaleError("a length schedule needs the attention mask: call the SentenceTransformer itself")
        if isinstance(t, torch.Tensor):
            if t.shape[0] != like.shape[0]:
                raise TempScaleError(f"TempScale: a batch of {like.shape[0]} rows but {t.shape[0]} lengths")
            t = t.to(like.dtype).view(-1, *([1] * (like.dim() - 1)))  # (B, 1, ..)
        if not fused:
            return t
        width = like.shape[-1] // 3
        ones = torch.ones(like.shape[-1], dtype=like.dtype, device=like.device)  # (3D,)
        if isinstance(t, torch.Tensor):
            return torch.cat([t.expand(*t.shape[:-1], width), ones[width:].expand(*t.shape[:-1], 2 * width)], -1)
        return torch.cat([ones[:width] * t, ones[width:]])

    def _scale_query(self, module: nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
        return output / self._temperature_view(output, self.family.fused_qkv)  # (B, T, D) or (B, T, 3D)

    def _scale_bias(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        bias = kwargs.get("position_bias", args[2] if len(args) > 2 else None)  # (B, H, T, T)
        if bias is None:
            return args, kwargs
        scaled = bias / self._temperature_view(bias, False)
        if "position_bias" in kwargs:
            return args, {**kwargs, "position_bias": scaled}
        return (*args[:2], scaled, *args[3:]), kwargs

    def remove(self) -> None:
        """Remove every hook and restore the original `scaling` values (bit for bit)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        if self._original_scaling:
            for attention, original in zip(self.attentions, self._original_scaling, strict=True):
                _set_scaling(attention, original)


def current_tempscale(model: SentenceTransformer) -> TempScalePatch | None:
    """The patch live on `model`, or None."""
    patch = getattr(model, _ATTRIBUTE, None)
    return patch if isinstance(patch, TempScalePatch) else None


def apply_tempscale(model: SentenceTransformer, config: TempScaleConfig | float) -> TempScalePatch:
    """Patch `model` in place (see the module docstring); raise if it is already patched or unsupported."""
    config = config if isinstance(config, TempScaleConfig) else TempScaleConfig(t=config)
    if current_tempscale(model) is not None:
        raise TempScaleError("the model is already TempScale'd; remove_tempscale(model) first, or use tempscale(...)")
    patch = TempScalePatch(model, config)
    object.__setattr__(model, _ATTRIBUTE, patch)
    return patch


def remove_tempscale(model: SentenceTransformer) -> TempScaleConfig | None:
    """Undo the live patch, if any, and return its settings."""
    patch = current_tempscale(model)
    if patch is None:
        return None
    patch.remove()
    object.__delattr__(model, _ATTRIBUTE)
    return patch.config


@contextmanager
def tempscale(model: SentenceTransformer, config: TempScaleConfig | float | None) -> Iterator[TempScalePatch | None]:
    """Run with `config` (None: no TempScale), then put back whatever patch the model had before."""
    previous = remove_tempscale(model)
    try:
        yield apply_tempscale(model, config) if config is not None else None
    finally:
        remove_tempscale(model)
        if previous is not None:
            apply_tempscale(model, previous)


@dataclass
class TempScaleEncoder:
    """A `TextEncoder` (lengthwise.encoder) running `model` under `config`: t for `encode`, t_query for
    queries, t_doc for documents, each times the length schedule; the model is left as it was after each call."""

    model: SentenceTransformer
    config: TempScaleConfig

    def _run(self, method: str, texts: Sequence[str], batch_size: int, show_progress: bool) -> np.ndarray:
        with tempscale(self.model, self.config):
            encode = getattr(SentenceTransformerEncoder(self.model), method)
            return encode(texts, batch_size=batch_size, show_progress=show_progress)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run("encode", texts, batch_size, show_progress)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._run("encode_queries", texts, batch_size, show_progress)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        return self._run("encode_documents", texts, batch_size, show_progress)


# ------------------------------------------------------------------------------------ baking and settings


def _query_rows(family: Family, attention: nn.Module) -> tuple[nn.Linear, slice]:
    projection = getattr(attention, family.query)
    rows = projection.out_features // 3 if family.fused_qkv else projection.out_features
    return projection, slice(0, rows)


def _baked_parameters(
    model: SentenceTransformer, config: TempScaleConfig
) -> tuple[Family, list[tuple[torch.Tensor, slice]]]:
    family, hf_model, attentions = detect_family(model)
    targets: list[tuple[torch.Tensor, slice]] = []
    for attention in attentions:
        projection, rows = _query_rows(family, attention)
        targets += [(p, rows) for p in (projection.weight, projection.bias) if p is not None]
    if family.position_bias is not None and config.scale_position_bias:
        bias = hf_model.get_submodule(family.position_bias)
        if not isinstance(bias, nn.Embedding):
            raise TempScaleError(f"{family.name}: {family.position_bias} is {type(bias).__name__}, not an Embedding")
        targets.append((bias.weight, slice(None)))
    return family, targets


def bake_refusal(model: SentenceTransformer, config: TempScaleConfig) -> str | None:
    """Why `config` cannot be folded into `model`'s weights exactly, or None when it can."""
    if config.schedule is not None:
        return "a length schedule gives each input its own temperature, which fixed weights cannot hold"
    if not config.is_symmetric:
        return (
            f"queries (t={config.temperature('query')}) and documents (t={config.temperature('document')}) differ "
            "from t; one set of weights holds one temperature — bake one directory per side"
        )
    _, targets = _baked_parameters(model, config)
    owners = {id(p) for p, _ in targets}
    shared = {p.data_ptr() for p, _ in targets}
    if any(p.data_ptr() in shared and id(p) not in owners for p in model.parameters()):
        return "a query projection shares its weights with another layer, which would be scaled too"
    power_of_two = math.log2(config.t).is_integer()
    for parameter, _ in targets:
        if parameter.dtype not in (torch.float32, torch.float64) and not power_of_two:
            return (
                f"weights are {parameter.dtype}: dividing by t={config.t} would round; load in float32 or use t = 2^k"
            )
    return None


def bake_tempscale(model: SentenceTransformer, config: TempScaleConfig | float, out_dir: str | Path) -> Path:
    """Save `model` to `out_dir` as a plain sentence-transformers model whose query projections (and MPNet's
    position bias) are divided by t. The model in memory is restored exactly; a live patch is kept out of
    the saved weights and put back. Raises `TempScaleError` with the reason where baking is not exact."""
    config = config if isinstance(config, TempScaleConfig) else TempScaleConfig(t=config)
    reason = bake_refusal(model, config)
    if reason is not None:
        raise TempScaleError(f"cannot bake TempScale exactly: {reason}")
    family, targets = _baked_parameters(model, config)
    out = Path(out_dir)
    originals = [parameter.detach().clone() for parameter, _ in targets]
    with tempscale(model, None), torch.no_grad():
        try:
            for parameter, rows in targets:
                parameter[rows] /= config.t
            model.save(str(out))
        finally:
            for (parameter, _), original in zip(targets, originals, strict=True):
                parameter.copy_(original)
    _write_settings(out, config, family, baked=True)
    return out


def _write_settings(folder: Path, config: TempScaleConfig, family: Family, *, baked: bool) -> None:
    from lengthwise.results import write_json_atomic

    note = "weights carry 1/t; do not apply again" if baked else "re-applied by lengthwise.load_model"
    write_json_atomic(
        folder / SETTINGS_FILE,
        {"format": 1, "family": family.name, "baked": baked, "note": note, "config": config.to_dict()},
    )


def save_tempscale(model: SentenceTransformer, out_dir: str | Path) -> Path:
    """Save a TempScale'd model (original weights) with its settings, so `load_model` re-applies them."""
    patch = current_tempscale(model)
    if patch is None:
        raise TempScaleError("the model is not TempScale'd; apply_tempscale(model, config) first, or use model.save")
    out = Path(out_dir)
    model.save(str(out))
    _write_settings(out, patch.config, patch.family, baked=False)
    return out


def read_tempscale_settings(folder: str | Path) -> tuple[TempScaleConfig, bool] | None:
    """(config, baked) from a saved model directory, or None when it holds no TempScale settings."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return TempScaleConfig.from_dict(data["config"]), bool(data["baked"])
    except (KeyError, TypeError, json.JSONDecodeError) as err:
        raise TempScaleError(f"{path}: unreadable TempScale settings ({err}); delete the file or re-save") from err


def apply_saved_tempscale(model: SentenceTransformer, folder: str | Path) -> TempScalePatch | None:
    """Re-apply the settings saved in `folder` (nothing for a baked model or a folder without settings)."""
    settings = read_tempscale_settings(folder) if Path(folder).is_dir() else None
    if settings is None or settings[1]:
        return None
    return apply_tempscale(model, settings[0])
