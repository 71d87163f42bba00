"""Long documents: read a text longer than the model's window whole (METHODS §5).

The method is at the top: `LongEncoder` (truncate, chunk-mean, chunk-weighted, multi-vector, late-chunking) implements
the project's `TextEncoder`, so every evaluator, the mteb adapter, the audit and TempScale take it (`config`,
`encoder`, `pooling`); `tune` picks a strategy on a dev split and `persist` saves it beside a model. Three
subpackages hold the rest:

- `storage`: a corpus encoded into checked, resumable shards (`encode`, the ``lengthwise encode`` command; `store`;
  the Parquet rows and the Ray runner);
- `search`: `LongIndex`, the one index over those shards (ANN engine, exact rescoring, BM25 and hybrid search);
- `tasks`: LongEmbed-style synthetic passkey / needle tasks, written (`synthetic`) and scored (`scoring`), with
  their one-call jobs (`run`).

An entry point that loads a model by name takes the loader (`lengthwise.core.models.ModelLoader`);
`lengthwise.encode` and `lengthwise.LongIndex` pass `lengthwise.load_model`. Names load on first use.
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
