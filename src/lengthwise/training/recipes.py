"""Named recipes: tested sets of `TrainConfig` settings, picked with ``lengthwise train --recipe NAME``.

A recipe only supplies defaults; a config file, a flag or ``--set`` given by the user still wins (`apply_recipe`).
Each recipe says what data it was measured on and where its numbers are, so a user knows what to expect.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lengthwise.core.errors import SettingError

__all__ = ["RECIPES", "Recipe", "apply_recipe"]


@dataclass(frozen=True)
class Recipe:
    """A name, what it is for, the settings it fixes, the data it was measured with and where the results are."""

    name: str
    summary: str
    settings: dict[str, Any] = field(default_factory=dict)
    data: str = ""
    results: str = ""


# The measured schedule both recipes train on: 40 steps × 16 pairs at N = 256 (all-MiniLM-L6-v2's window), lr 5e-5
# with 10 % warm-up, each side copied m times with m random up to the window.
SCHEDULE: dict[str, Any] = {
    "elongate": "random",
    "lr": 5e-5,
    "warmup_ratio": 0.1,
    "batch_size": 16,
    "max_length": 256,
    "max_steps": 40,
    "save_steps": 20,
    "logging_steps": 10,
}

LENGTH_ROBUST = Recipe(
    name="length-robust",
    summary=(
        "Continue training a sentence-transformers model on positive pairs, half the batches copy-and-concat "
        "elongated (each side copied m times, m random up to the window) and half plain, so that the length "
        "attack's upward shift goes away while the short-text quality holds."
    ),
    settings={
        "method": "copy-concat",
        "copy_concat_share": 0.5,
        **SCHEDULE,
    },
    data=(
        "Short positive pairs (anchor/positive JSONL): the measured run used an equal, seeded mix of MRPC train "
        "paraphrases, Twitter URL paraphrases, SNLI entailment pairs and Flickr8k caption pairs "
        "(`experiments/length_robust.py` writes it)."
    ),
    results="docs/results/README.md, study 1 at scale",
)

LENGTH_INVARIANT = Recipe(
    name="length-invariant",
    summary=(
        "Continue training on positive pairs with InfoNCE on the plain pairs, each side's elongation f(S, m) pulled "
        "to the model's own embedding of S (gradient stopped), the batch's elongated cosines held to the plain "
        "ones, and each plain embedding held at the starting model's (retention), so that copying texts leaves "
        "every pair's similarity where it was, not only the mean, without moving the space. Measured from "
        "all-MiniLM-L6-v2 over three seeds: the STS-B m = 100 attack's JSD within its permutation null in each "
        "(p = 0.34–0.77), STS-B 82.05–82.24 and the STS12–16 average 78.73–78.84 against 82.03 and 78.59 "
        "unchanged (study 7)."
    ),
    settings={
        "method": "length-invariant",
        "invariance_weight": 1.0,
        "consistency_weight": 4.0,
        "invariance_reference": "self",
        "retention_weight": 1.0,
        **SCHEDULE,
    },
    data=LENGTH_ROBUST.data.replace("`experiments/length_robust.py`", "`experiments/length_invariant.py`"),
    results="docs/results/README.md, study 7",
)

RECIPES = {recipe.name: recipe for recipe in (LENGTH_ROBUST, LENGTH_INVARIANT)}


def apply_recipe(values: dict[str, Any]) -> dict[str, Any]:
    """`values` over the defaults of the recipe it names (``values["recipe"]``); unchanged without one."""
    name = values.get("recipe")
    if not name:
        return values
    recipe = RECIPES.get(str(name).strip().lower())
    if recipe is None:
        raise SettingError("recipe", name, f"not known; use one of: {', '.join(RECIPES)}")
    method = values.get("method")
    if method is not None and str(getattr(method, "value", method)).strip().lower() != recipe.settings["method"]:
        problem = (
            f"the recipe {recipe.name} trains with method {recipe.settings['method']}; drop this method (or drop the "
            "recipe to train this method on its own)"
        )
        raise SettingError("method", method, problem)
    return {**recipe.settings, **values, "recipe": recipe.name}
