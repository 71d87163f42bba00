"""lengthwise: make text-embedding models robust to text length.

The public API: load a model, build token-level length variants, embed them exactly, audit, fix and train.
Names load on first use (PEP 562), so `import lengthwise` costs no torch import until a model is touched.
"""

from __future__ import annotations

from lengthwise._version import __version__ as __version__  # re-exported
from lengthwise.core._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_MODEL": "lengthwise.core.defaults",
    "LengthwiseError": "lengthwise.core.errors",
    "SettingError": "lengthwise.core.errors",
    "DataFormatError": "lengthwise.core.errors",
    "ModelLoadError": "lengthwise.core.errors",
    "load_model": "lengthwise.facade",
    "train": "lengthwise.facade",
    "audit_model": "lengthwise.pipelines",
    "build_encoder": "lengthwise.facade",
    "encode": "lengthwise.facade",
    "evaluate": "lengthwise.pipelines",
    "AuditConfig": "lengthwise.audit.config",
    "AuditResult": "lengthwise.audit.pairs.attack",
    "run_audit": "lengthwise.audit.pairs.attack",
    "embed_ids": "lengthwise.core.embed",
    "embed_texts": "lengthwise.core.embed",
    "PairSet": "lengthwise.core.data",
    "TextPair": "lengthwise.core.data",
    "default_probe_pairs": "lengthwise.core.data",
    "read_pairs": "lengthwise.core.data",
    "js_distance": "lengthwise.audit.pairs.shift",
    "similarity_shift": "lengthwise.audit.pairs.shift",
    "TempScaleConfig": "lengthwise.tempscale.config",
    "tempscale": "lengthwise.tempscale",
    "apply_tempscale": "lengthwise.tempscale.apply",
    "remove_tempscale": "lengthwise.tempscale.apply",
    "bake_tempscale": "lengthwise.tempscale.persist",
    "Elongation": "lengthwise.core.tokens",
    "elongate": "lengthwise.core.tokens",
    "first_k": "lengthwise.core.tokens",
    "shuffle_words": "lengthwise.core.tokens",
    "TrainConfig": "lengthwise.training.config",
    "LongEncoder": "lengthwise.longdoc.encoder",
    "LongDocConfig": "lengthwise.longdoc.config",
    "LongIndex": "lengthwise.facade",
    "MilvusIndex": "lengthwise.facade",
    "TokenChoice": "lengthwise.search.types",
}
__all__ = sorted([*_EXPORTS, "__version__"])
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
