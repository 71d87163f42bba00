"""Bake TempScale into plain weights, or save its settings beside a model to be re-applied at load.

Baking never writes over the model it reads (``--out`` = the source is refused), and it refuses a model whose
weights already carry a baked temperature — a second bake would divide by t again while its settings file still
said t. Asked explicitly (``stack=True``, ``--rebake``), it bakes on top and records the product of the
temperatures, with each step in ``lengthwise_tempscale.json``.

`bake` and `save_tempscaled` do the same by model name, as one call each (``lengthwise tempscale bake`` / ``save``):
they check `out`, load the model plain and set aside any TempScale saved with it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer
from torch import nn

from lengthwise.tempscale.apply import apply_tempscale, current_tempscale, tempscale
from lengthwise.tempscale.config import TempScaleConfig, TempScaleError
from lengthwise.tempscale.families import Family, detect_family, query_rows
from lengthwise.tempscale.patch import TempScalePatch

__all__ = [
    "SETTINGS_FILE",
    "BakeResult",
    "apply_saved_tempscale",
    "bake",
    "bake_plan",
    "bake_refusal",
    "bake_tempscale",
    "read_tempscale_settings",
    "save_tempscale",
    "save_tempscaled",
]

SETTINGS_FILE = "lengthwise_tempscale.json"


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
            raise TempScaleError(
                None, None, f"{family.name}: {family.position_bias} is {type(bias).__name__}, not an Embedding"
            )
        targets.append((bias.weight, slice(None)))
    return family, targets


def _config_refusal(config: TempScaleConfig) -> str | None:
    """Why no set of weights can hold `config` (whatever the model), or None."""
    if config.schedule is not None:
        return "a length schedule gives each input its own temperature, which fixed weights cannot hold"
    if not config.is_symmetric:
        return (
            f"queries (t={config.temperature('query')}) and documents (t={config.temperature('document')}) differ "
            "from t; one set of weights holds one temperature — bake one directory per side"
        )
    return None


def bake_refusal(model: SentenceTransformer, config: TempScaleConfig) -> str | None:
    """Why `config` cannot be folded into `model`'s weights exactly, or None when it can."""
    reason = _config_refusal(config)
    if reason is not None:
        return reason
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


def _source_folder(model: SentenceTransformer) -> Path | None:
    """The sentence-transformers folder `model` was loaded from, when it was loaded from one."""
    loaded_from = getattr(getattr(getattr(model[0], "auto_model", None), "config", None), "_name_or_path", None)
    if not loaded_from:
        return None
    path = Path(str(loaded_from))
    return next((p for p in (path, path.parent) if (p / "modules.json").is_file()), path if path.is_dir() else None)


def bake_plan(
    config: TempScaleConfig, out_dir: str | Path, source: str | Path | None, *, stack: bool = False
) -> tuple[TempScaleConfig, list[float]]:
    """What a bake of `source` into `out_dir` will record: (the total configuration, each baked t in order).

    Refuses (`TempScaleError`) a configuration no weights can hold (a schedule, query ≠ document), to write over
    `source` itself (on ``out``), and to bake a model whose weights already carry a temperature unless `stack`
    (on ``rebake``, `bake`'s name for it); stacked, the recorded t is the product of every baked t.
    """
    reason = _config_refusal(config)
    if reason is not None:
        raise TempScaleError(None, None, f"cannot bake TempScale exactly: {reason}")
    out = Path(out_dir)
    folder = Path(source) if source is not None else None
    if folder is not None and folder.is_dir() and out.exists() and out.resolve() == folder.resolve():
        raise TempScaleError(
            "out",
            str(out),
            "is the model being baked; baking in place would overwrite its weights, so pass another folder",
        )
    previous = read_tempscale_settings(folder) if folder is not None and folder.is_dir() else None
    if previous is None or not previous[1]:
        return config, [config.t]
    done, steps = previous[0], _baked_steps(folder) or [previous[0].t]
    if not stack:
        raise TempScaleError(
            "rebake",
            stack,
            f"{folder} already carries t = {done.t:g} in its weights ({SETTINGS_FILE}); baking again divides by t "
            f"again: bake the original model, or rebake it to record t = {done.t:g} × {config.t:g}",
        )
    return replace(config, t=done.t * config.t), [*steps, config.t]


def _baked_steps(folder: Path | None) -> list[float]:
    if folder is None or not (folder / SETTINGS_FILE).is_file():
        return []
    try:
        steps = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8")).get("baked_steps", [])
        return [float(t) for t in steps]
    except (ValueError, TypeError, AttributeError):
        return []


def bake_tempscale(
    model: SentenceTransformer,
    config: TempScaleConfig | float,
    out_dir: str | Path,
    *,
    source: str | Path | None = None,
    stack: bool = False,
) -> Path:
    """Save `model` to `out_dir` as a plain sentence-transformers model whose query projections (and MPNet's
    position bias) are divided by t. The model in memory is restored exactly; a live patch is kept out of
    the saved weights and put back. Raises `TempScaleError` with the reason where baking is not exact, where
    `out_dir` is the model's own folder, or where that folder is already baked (unless `stack`, see `bake_plan`).
    `source` is the folder the model was loaded from (default: found from the model)."""
    config = config if isinstance(config, TempScaleConfig) else TempScaleConfig(t=config)
    total, steps = bake_plan(config, out_dir, source if source is not None else _source_folder(model), stack=stack)
    reason = bake_refusal(model, config)
    if reason is not None:
        raise TempScaleError(None, None, f"cannot bake TempScale exactly: {reason}")
    family, targets = _baked_parameters(model, config)
    out = Path(out_dir)
    originals = [parameter.detach().clone() for parameter, _ in targets]
    with tempscale(model, None), torch.no_grad():
        try:
            for parameter, rows in targets:
                parameter[rows] /= config.t
            if not all(torch.isfinite(parameter[rows]).all() for parameter, rows in targets):
                raise TempScaleError(None, None, f"weights divided by t = {config.t:g} overflow; use a t nearer 1")
            model.save(str(out))
        finally:
            for (parameter, _), original in zip(targets, originals, strict=True):
                parameter.copy_(original)
    _write_settings(out, total, family, baked=True, steps=steps)
    return out


def _write_settings(
    folder: Path, config: TempScaleConfig, family: Family, *, baked: bool, steps: list[float] | None = None
) -> None:
    from lengthwise.core.results import write_json_atomic

    note = "weights carry 1/t; do not apply again" if baked else "re-applied by lengthwise.load_model"
    payload: dict[str, object] = {
        "format": 1,
        "family": family.name,
        "baked": baked,
        "note": note,
        "config": config.to_dict(),
    }
    if baked:
        payload["baked_steps"] = steps or [config.t]  # each bake's t; config.t is their product
    write_json_atomic(folder / SETTINGS_FILE, payload)


def save_tempscale(model: SentenceTransformer, out_dir: str | Path) -> Path:
    """Save a TempScale'd model (original weights) with its settings, so `load_model` re-applies them."""
    patch = current_tempscale(model)
    if patch is None:
        raise TempScaleError(
            None, None, "the model is not TempScale'd; apply_tempscale(model, config) first, or use model.save"
        )
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
        raise TempScaleError(
            None, None, f"{path}: unreadable TempScale settings ({err}); delete the file or re-save"
        ) from err


def apply_saved_tempscale(model: SentenceTransformer, folder: str | Path) -> TempScalePatch | None:
    """Re-apply the settings saved in `folder` (nothing for a baked model or a folder without settings)."""
    settings = read_tempscale_settings(folder) if Path(folder).is_dir() else None
    if settings is None or settings[1]:
        return None
    return apply_tempscale(model, settings[0])


@dataclass(frozen=True)
class BakeResult:
    """What `bake` wrote: the folder, the t its weights carry (the product of `steps` after a rebake), the note on
    TempScale settings saved with the source that were set aside, and the largest difference between the baked
    model's embeddings and the run-time patch's over the probe texts (None: not verified)."""

    out: Path
    t: float
    steps: tuple[float, ...]
    ignored: str | None
    max_difference: float | None


def _untouched_model(
    model: str | os.PathLike[str], out: Path, device: str | None, trust_remote_code: bool
) -> tuple[SentenceTransformer, str | None]:
    """Check `out` (before anything loads), then load the model plain (`load_plain_model`: no TempScale saved beside
    it is applied), and the note on the TempScale settings saved beside it that are set aside (None: none, or baked
    ones, which are its weights)."""
    from lengthwise.core.models import load_plain_model, resolve_model_path
    from lengthwise.core.output_set import prepare_out

    prepare_out(out)
    loaded = load_plain_model(model, device=device, trust_remote_code=trust_remote_code)
    folder = Path(resolve_model_path(model))
    saved = read_tempscale_settings(folder) if folder.is_dir() else None
    return loaded, None if saved is None or saved[1] else str(saved[0])


def bake(
    model: str | os.PathLike[str],
    t: float | TempScaleConfig,
    out: str | os.PathLike[str],
    *,
    rebake: bool = False,
    verify: bool = True,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> BakeResult:
    """Fold TempScale's t into the weights and save a plain sentence-transformers model (= ``lengthwise tempscale
    bake``): the query projections (and MPNet's relative position bias) are divided by t. With `verify`, the saved
    model's embeddings of the probe texts must equal the run-time patch's (within 1e-5), else `TempScaleError`.
    Schedules and query ≠ document temperatures cannot be baked; `out` must not be the model itself, and an already
    baked model needs `rebake` (the record then holds the product of the t's). Refusals come before the model loads.
    TempScale settings saved with `model` (not baked) are set aside: `BakeResult.ignored` says which.
    """
    from lengthwise.core.models import resolve_model_path

    config = TempScaleConfig.of(t)
    assert config is not None
    out = Path(out)
    source = Path(resolve_model_path(model))
    folder = source if source.is_dir() else None
    total, steps = bake_plan(config, out, folder, stack=rebake)
    loaded, ignored = _untouched_model(model, out, device, trust_remote_code)
    bake_tempscale(loaded, config, out, source=folder, stack=rebake)
    difference = _bake_difference(loaded, config, out) if verify else None
    if difference is not None and difference > 1e-5:
        raise TempScaleError(
            None, None, f"baked weights differ from the run-time patch by {difference:.2e} (> 1e-5); do not use {out}"
        )
    return BakeResult(out, total.t, tuple(steps), ignored, difference)


def _bake_difference(model: SentenceTransformer, config: TempScaleConfig, out: Path) -> float:
    """Largest |baked − run-time| over the embeddings of the probe texts."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.data import default_probe_pairs

    texts = sorted({p.text1 for p in default_probe_pairs().pairs})[:64]
    with tempscale(model, config):
        patched = model.encode(texts, convert_to_numpy=True)
    baked = SentenceTransformer(str(out), device=str(model.device)).encode(texts, convert_to_numpy=True)
    return float(np.abs(baked - patched).max())


def save_tempscaled(
    model: str | os.PathLike[str],
    t: float | TempScaleConfig,
    out: str | os.PathLike[str],
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> str | None:
    """Save the model with its TempScale settings beside the original weights (= ``lengthwise tempscale save``);
    lengthwise's `load_model` re-applies them, a plain sentence-transformers load gives the untouched model. Any
    configuration can be saved, schedules included. Returns the note on TempScale settings the source already had
    (set aside), or None."""
    config = TempScaleConfig.of(t)
    out = Path(out)
    loaded, ignored = _untouched_model(model, out, device, trust_remote_code)
    with tempscale(loaded, config):
        save_tempscale(loaded, out)
    return ignored
