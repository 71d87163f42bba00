"""Save a long-document choice beside a model, and find it again when the model is loaded.

`save_longdoc` writes the model and ``lengthwise_longdoc.json``; `lengthwise.facade.load_model` calls
`attach_saved_longdoc`, which keeps the saved `LongDocConfig` on the loaded model, and a `LongEncoder` built
without a config uses it. A plain sentence-transformers load ignores the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from sentence_transformers import SentenceTransformer

from lengthwise.core.results import write_json_atomic
from lengthwise.longdoc.config import LongDocConfig, LongDocError

__all__ = [
    "ATTRIBUTE",
    "SETTINGS_FILE",
    "attach_saved_longdoc",
    "read_longdoc_settings",
    "save_longdoc",
    "saved_longdoc",
]

SETTINGS_FILE = "lengthwise_longdoc.json"
ATTRIBUTE = "lengthwise_longdoc"


def save_longdoc(model: SentenceTransformer, config: LongDocConfig, out_dir: str | Path) -> Path:
    """Save `model` to `out_dir` with `config`, so `lengthwise.load_model` brings the choice back."""
    from lengthwise.core.output_set import check_model_target

    out = Path(out_dir)
    try:
        check_model_target(out)
    except ValueError as error:
        raise LongDocError(str(error).removeprefix(f"{out}: "), field="out", value=str(out)) from None
    model.save(str(out))
    write_settings(out, config)
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
        raise LongDocError(f"{path}: unreadable long-document settings ({err}); delete the file or re-save") from err


def attach_saved_longdoc(model: SentenceTransformer, folder: str | Path) -> LongDocConfig | None:
    """Keep the config saved in `folder` (if any) on `model`, where `saved_longdoc` finds it."""
    config = read_longdoc_settings(folder) if Path(folder).is_dir() else None
    if config is not None:
        object.__setattr__(model, ATTRIBUTE, config)
    return config


def saved_longdoc(model: SentenceTransformer) -> LongDocConfig | None:
    """The config that was saved with `model`, or None."""
    config = getattr(model, ATTRIBUTE, None)
    return config if isinstance(config, LongDocConfig) else None
