"""Length-aware training objectives on the sentence-transformers trainer (METHODS §3)."""

from __future__ import annotations

from lengthwise.core.lazy import lazy_exports

_EXPORTS = {
    "Method": "config",
    "TrainConfig": "config",
    "TrainResult": "run",
    "TrainingDiverged": "guard",
    "train": "run",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
