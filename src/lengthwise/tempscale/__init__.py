"""TempScale (METHODS §2): divide every self-attention logit by a temperature t, at no run-time cost.

``softmax(QKᵀ/(√d·t) + mask)`` equals scaling the queries by 1/t, so the patch never replaces an attention
function and SDPA / flash attention stay on. A scalar t on BERT, RoBERTa, XLM-R and DistilBERT changes the
modules' ``scaling`` attribute (passed to every attention backend); MPNet, ModernBERT and length schedules
divide the query projection's output in a forward hook, per sequence, with the lengths read from the
attention mask. Query and document temperatures are picked per call from sentence-transformers' ``task``.
MPNet's relative position bias is divided by t too (``scale_position_bias``): the paper's
``softmax((QKᵀ/√d + bias)/t)``. Every patch is removable and restores the exact original state; any other
architecture raises `TempScaleError` naming the supported ones.

This package is the public API: apply, remove or scope a patch, encode under one, bake it into weights, or save
it with the model (`bake_tempscale` / `save_tempscale` on a loaded model; `bake` / `save_tempscaled` by model name,
the ``lengthwise tempscale bake`` / ``save`` commands). The settings live in `lengthwise.tempscale.config`, the
supported architectures in `lengthwise.tempscale.families` and the hooks in `lengthwise.tempscale.patch`; their
public names are re-exported here.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "LengthSchedule": "config",
    "TempScaleConfig": "config",
    "TempScaleError": "config",
    "FAMILIES": "families",
    "Family": "families",
    "detect_family": "families",
    "TempScalePatch": "patch",
    "TempScaleEncoder": "apply",
    "apply_tempscale": "apply",
    "current_tempscale": "apply",
    "remove_tempscale": "apply",
    "tempscale": "apply",
    "BakeResult": "persist",
    "SETTINGS_FILE": "persist",
    "apply_saved_tempscale": "persist",
    "bake": "persist",
    "bake_refusal": "persist",
    "bake_tempscale": "persist",
    "read_tempscale_settings": "persist",
    "save_tempscale": "persist",
    "save_tempscaled": "persist",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


class _CallableModule(ModuleType):
    """`lengthwise.tempscale(model, t)` stays the context manager it was before this became a package."""

    def __call__(self, model: Any, config: Any) -> Any:
        return self.tempscale(model, config)


sys.modules[__name__].__class__ = _CallableModule
