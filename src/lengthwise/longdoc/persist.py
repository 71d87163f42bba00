"""Save a long-document choice beside a model, and find it again when the model is loaded.

`save_longdoc` writes the model and ``lengthwise_longdoc.json``; `save_long_documents` does it by model name
(``lengthwise longdoc save``). `lengthwise.load_model` calls `attach_saved_longdoc`, which keeps the saved
`LongDocConfig` on the loaded model, and a `LongEncoder` built without a config uses it. A plain
sentence-transformers load ignores the file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from sentence_transformers import SentenceTransformer

from lengthwise.core.errors import SettingError
from lengthwise.core.results import write_json_atomic
from lengthwise.longdoc.config import ATTRIBUTE, RECOMMENDED, LongDocConfig, LongDocError, saved_longdoc

__all__ = [
    "SETTINGS_FILE",
    "attach_saved_longdoc",
    "read_longdoc_settings",
    "resolved_longdoc",
    "save_long_documents",
    "save_longdoc",
]

SETTINGS_FILE = "lengthwise_longdoc.json"


def save_longdoc(model: SentenceTransformer, config: LongDocConfig, out_dir: str | Path) -> Path:
    """Save `model` to `out_dir` with `config`, so `lengthwise.load_model` brings the choice back."""
    from lengthwise.core.output_set import check_model_target

    out = Path(out_dir)
    check_model_target(out, field="out")  # a `SettingError` naming ``out``
    model.save(str(out))
    write_settings(out, config)
    return out


def save_long_documents(
    model: str | os.PathLike[str],
    long: str | LongDocConfig,
    out: str | os.PathLike[str],
    *,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> Path:
    """Save the model with a long-document choice (= ``lengthwise longdoc save``): `lengthwise.load_model` and
    `LongEncoder(model)` then use it. `out` is checked, then the window and stride against this model, before
    anything is written.

    The model is loaded plain (`load_plain_model`): what is saved is its weights and this choice, and a TempScale
    saved beside the source is not carried over (save it again with ``lengthwise tempscale save``).
    """
    from lengthwise.core.models import load_plain_model
    from lengthwise.core.output_set import prepare_out
    from lengthwise.longdoc.encoder import LongEncoder

    config = long if isinstance(long, LongDocConfig) else LongDocConfig.named(long)
    out = prepare_out(out)
    loaded = load_plain_model(model, device=device, trust_remote_code=trust_remote_code)
    LongEncoder(loaded, config).spans([1] * 8)  # checks the window and stride against this model
    save_longdoc(loaded, config, out)
    return out


def write_settings(folder: str | Path, config: LongDocConfig) -> Path:
    """Write only the settings file into an existing model folder."""
    return write_json_atomic(
        Path(folder) / SETTINGS_FILE,
        {"format": 1, "note": "read by lengthwise.load_model; LongEncoder(model) uses it", "config": config.to_dict()},
    )


def read_longdoc_settings(folder: str | Path) -> LongDocConfig | None:
    """The config saved in a model folder, or None when there is none."""
    path = Path(folder) / SETTINGS_FILE
    if not path.is_file():
        return None
    try:
        return LongDocConfig.from_dict(json.loads(path.read_text(encoding="utf-8"))["config"])
    except (KeyError, TypeError, json.JSONDecodeError) as err:
        raise LongDocError(
            None, None, f"{path}: unreadable long-document settings ({err}); delete the file or re-save"
        ) from err


def attach_saved_longdoc(model: SentenceTransformer, folder: str | Path) -> LongDocConfig | None:
    """Keep the config saved in `folder` (if any) on `model`, where `saved_longdoc` finds it."""
    config = read_longdoc_settings(folder) if Path(folder).is_dir() else None
    if config is not None:
        object.__setattr__(model, ATTRIBUTE, config)
    return config


def resolved_longdoc(
    model: SentenceTransformer,
    long: str | LongDocConfig | None = None,
    *,
    window: int | None = None,
    stride: int | None = None,
) -> LongDocConfig | None:
    """The long-document choice a job runs `model` with: `long` (a strategy name, ``"default"`` =
    `RECOMMENDED`, or a config), else the one saved with the model, with `window` / `stride` over it; None when
    neither is set (the model's own truncation). A window or stride without a strategy is a `SettingError`."""
    saved = saved_longdoc(model)
    if long is None and saved is None:
        if window is not None or stride is not None:
            raise SettingError("strategy", None, "a window or stride needs a long-document strategy, e.g. chunk-mean")
        return None
    base = long if isinstance(long, LongDocConfig) else saved if long is None else LongDocConfig.named(long)
    changes = {key: value for key, value in {"window": window, "stride": stride}.items() if value is not None}
    return (base or RECOMMENDED).updated(**changes)  # base is set here; `or` only narrows the type
