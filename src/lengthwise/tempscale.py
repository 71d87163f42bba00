"""TempScale (METHODS §2): divide every self-attention logit by a temperature t, at no run-time cost.

``softmax(QKᵀ/(√d·t) + mask)`` equals scaling the queries by 1/t, so the patch never replaces an attention
function and SDPA / flash attention stay on. A scalar t on BERT, RoBERTa, XLM-R and DistilBERT changes the
modules' ``scaling`` attribute (passed to every attention backend); MPNet, ModernBERT and length schedules
divide the query projection's output in a forward hook, per sequence, with the lengths read from the
attention mask. Query and document temperatures are picked per call from sentence-transformers' ``task``.
MPNet's relative position bias is divided by t too (``scale_position_bias``): the paper's
``softmax((QKᵀ/√d + bias)/t)``. Every patch is removable and restores the exact original state; any other
architecture raises `TempScaleError` naming the supported ones.

This module is the public API: apply, remove or scope a patch, encode under one, bake it into weights, or save
it with the model. The settings live in `lengthwise.tempscale_config`, the supported architectures in
`lengthwise.tempscale_families` and the hooks in `lengthwise.tempscale_patch`; their public names are
re-exported here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer
from torch import nn

from lengthwise.encoder import SentenceTransformerEncoder
from lengthwise.tempscale_config import LengthSchedule, TempScaleConfig, TempScaleError
from lengthwise.tempscale_families import FAMILIES, Family, detect_family, query_rows
from lengthwise.tempscale_patch import TempScalePatch

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


def _baked_parameters(
    model: SentenceTransformer, config: TempScaleConfig
) -> tuple[Family, list[tuple[torch.Tensor, slice]]]:
    family, hf_model, attentions = detect_family(model)
    targets: list[tuple[torch.Tensor, slice]] = []
    for attention in attentions:
        projection, rows = query_rows(family, attention)
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
