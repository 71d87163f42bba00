"""Length-binned evaluation that agrees with MTEB: STS, retrieval and frozen-embedding classification (METHODS §4).

Every evaluator takes a `lengthwise.core.encoder.TextEncoder` and, given the model's `TokenView`, reports each task
per token-length bin with counts. `run.evaluate_task` runs one task from an `EvalConfig` and writes its record
(`schema`); `tasks` holds the one `Task` enum and its dispatch. `lengthwise eval` is the command-line front end;
`st_evaluators` plugs the same code into sentence-transformers training and `mteb_adapter` runs any encoder
through mteb v2.
"""

from __future__ import annotations

from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "LengthBins": "lengthwise.core.bins",
    "ClassificationConfig": "config",
    "Classifier": "config",
    "EvalConfig": "config",
    "FewShotSampler": "config",
    "RetrievalConfig": "config",
    "SelfHits": "config",
    "Task": "tasks",
    "evaluate_classification": "classification",
    "evaluate_retrieval": "retrieval",
    "evaluate_sts": "sts",
    "evaluate_task": "run",
    "read_beir": "data",
    "read_classification": "data",
    "read_labelled": "data",
    "read_sts": "data",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
