"""Sections lengthwise adds to a trained model's card (``README.md``): the recipe, its data, what was measured.

Each section sits between HTML comment markers named by its key, so writing it again replaces it instead of
adding a copy; the rest of the card (sentence-transformers' own) is left as it is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["recipe_section", "write_card_section"]


def _markers(key: str) -> tuple[str, str]:
    return f"<!-- lengthwise:{key}:begin -->", f"<!-- lengthwise:{key}:end -->"


def write_card_section(model_dir: str | Path, key: str, markdown: str) -> Path:
    """Put `markdown` into ``MODEL_DIR/README.md`` as the section `key` (replacing an earlier one), atomically."""
    path = Path(model_dir) / "README.md"
    begin, end = _markers(key)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{begin}\n{markdown.strip()}\n{end}\n"
    if begin in text and end in text:
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = head + block + tail.lstrip("\n")
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block
    staging = path.with_name(f".{path.name}.partial")
    staging.write_text(text, encoding="utf-8")
    os.replace(staging, path)
    return path


def recipe_section(
    recipe: Any, settings: Mapping[str, Any], data: Mapping[str, Any], steps: int, metrics: Mapping[str, float]
) -> str:
    """The card section of a model trained with a named recipe: what it is, the settings, data and dev checks."""
    from lengthwise.training.methods import settings_class

    own = [item.name for item in dataclasses.fields(settings_class(settings.get("method", "pairs")))]
    keys = ("method", *own, "elongate", "lr", "warmup_ratio", "batch_size", "max_length", "seed")
    rows = "\n".join(f"| `{key}` | `{settings.get(key)}` |" for key in keys)
    source = data.get("source", "?")
    lines = [
        f"## lengthwise recipe: `{recipe.name}`",
        "",
        recipe.summary,
        "",
        f"Trained with `lengthwise train --recipe {recipe.name}` for {steps} steps, starting from "
        f"`{settings.get('model')}`.",
        "",
        "| setting | value |",
        "|---|---|",
        rows,
        "",
        f"**Data:** `{source}` ({data.get('n_examples', '?')} examples, sha256 `{str(data.get('sha256', '?'))[:16]}`). "
        + recipe.data,
    ]
    if metrics:
        shown = "\n".join(f"| `{name}` | {value:.4f} |" for name, value in sorted(metrics.items()))
        lines += ["", "Checks at the last evaluation during training:", "", "| metric | value |", "|---|---|", shown]
    if recipe.results:
        lines += ["", f"Measured comparison with the other fixes: {recipe.results}."]
    return "\n".join(lines)
