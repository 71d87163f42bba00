"""lengthwise: make text-embedding models robust to text length.

The public API: load a model, build token-level length variants, embed them exactly, audit, fix and train.
"""

from importlib import metadata

try:
    __version__ = metadata.version("lengthwise")
except metadata.PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0"

from lengthwise.audit import AuditConfig, AuditResult, run_audit
from lengthwise.embed import embed_ids, embed_texts
from lengthwise.models import DEFAULT_MODEL, load_model
from lengthwise.pairs import PairSet, TextPair, default_probe_pairs, read_pairs
from lengthwise.shift import js_distance, similarity_shift
from lengthwise.tempscale import TempScaleConfig, apply_tempscale, bake_tempscale, remove_tempscale, tempscale
from lengthwise.tokens import Elongation, elongate, first_k, shuffle_words
from lengthwise.training import TrainConfig, train

__all__ = [
    "DEFAULT_MODEL",
    "AuditConfig",
    "AuditResult",
    "Elongation",
    "PairSet",
    "TempScaleConfig",
    "TextPair",
    "TrainConfig",
    "__version__",
    "apply_tempscale",
    "bake_tempscale",
    "default_probe_pairs",
    "elongate",
    "embed_ids",
    "embed_texts",
    "first_k",
    "js_distance",
    "load_model",
    "read_pairs",
    "remove_tempscale",
    "run_audit",
    "shuffle_words",
    "similarity_shift",
    "tempscale",
    "train",
]
