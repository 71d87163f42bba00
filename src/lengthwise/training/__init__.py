"""Length-aware training objectives on the sentence-transformers trainer (METHODS §3)."""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "AnchorSettings": "methods",
    "CopyConcatSettings": "methods",
    "HiCLSettings": "methods",
    "LengthInvariantSettings": "methods",
    "Method": "config",
    "SimDESettings": "methods",
    "TrainConfig": "config",
    "TrainResult": "run",
    "TrainingDiverged": "lengthwise.core.errors",
    "config_from_mapping": "config",
    "run_training": "run",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
