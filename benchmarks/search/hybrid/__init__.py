"""Hybrid long-document search: dense windows, BM25 and their fusion, measured through the product's own path.

One module per stage or group of stages: `quality` (quality, aggregations, tuned), `engines`, `text_side`
(text-side, window-query), `scale` (scale, scale-depth, scale-model), `recall`, `duplicated` and `table`; `_common`
and `_rule` hold what they share and `__main__` the command line, ``python -m benchmarks.search.hybrid STAGE``
(benchmarks/README.md describes every stage). Imports run one way: `__main__` → the stages → `_common`, `_rule`.

The names below are re-exported for tests/test_bench_hybrid_*.py. The results file's path is not: it is read and
written in `_common` alone, so a test redirects it there (``monkeypatch.setattr(_common, "RESULTS", ...)``).
"""

from benchmarks.search.hybrid._common import _exact_fused_batched, _has_lexical, _indexed, _lexical_folder, _scale_texts
from benchmarks.search.hybrid._rule import SETS
from benchmarks.search.hybrid.duplicated import NOTICE, _duplicated_beir
from benchmarks.search.hybrid.quality import RUN_FIELDS, _aggregate, _both, _run_records, _write_model_check
from benchmarks.search.hybrid.scale import (
    NOISE,
    PER_DOC,
    SCALE_MODEL_UNKNOWN,
    _lexical_build,
    _lexical_complete,
    _scale_index,
    _scale_key,
    _scale_source,
    record_scale_model,
    scale_fusion,
    stage_scale,
    stage_scale_depth,
)

__all__ = [
    "NOISE",
    "NOTICE",
    "PER_DOC",
    "RUN_FIELDS",
    "SCALE_MODEL_UNKNOWN",
    "SETS",
    "_aggregate",
    "_both",
    "_duplicated_beir",
    "_exact_fused_batched",
    "_has_lexical",
    "_indexed",
    "_lexical_build",
    "_lexical_complete",
    "_lexical_folder",
    "_run_records",
    "_scale_index",
    "_scale_key",
    "_scale_source",
    "_scale_texts",
    "_write_model_check",
    "record_scale_model",
    "scale_fusion",
    "stage_scale",
    "stage_scale_depth",
]
