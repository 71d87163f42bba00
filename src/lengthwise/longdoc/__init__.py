"""Long documents: read a text longer than the model's window whole (METHODS §5).

`LongEncoder` (truncate, chunk-mean, chunk-weighted, multi-vector, late-chunking) implements the project's
`TextEncoder`, so every evaluator, the mteb adapter, the audit and TempScale take it; `synthetic` writes seeded
passkey / needle tasks and `scoring` scores them as LongEmbed does; `tune` picks a strategy on a dev split and
`persist` saves it beside a model. Names load on first use.
"""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "DocumentWindows": "encoder",
    "LongDocConfig": "config",
    "LongDocError": "config",
    "LongEncoder": "encoder",
    "RECOMMENDED": "config",
    "Strategy": "config",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
