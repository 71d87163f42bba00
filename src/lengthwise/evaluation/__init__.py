"""Length-binned evaluation that agrees with MTEB: STS, retrieval and frozen-embedding classification (METHODS §4).

Every evaluator takes a `lengthwise.encoder.TextEncoder` and, given the model's `TokenView`, reports each task per
token-length bin with counts. `lengthwise eval` is the command-line front end; `st_evaluators` plugs the same code
into sentence-transformers training and `mteb_adapter` runs any encoder through mteb v2.
"""

from lengthwise.evaluation.bins import LengthBins
from lengthwise.evaluation.classification import ClassificationConfig, evaluate_classification
from lengthwise.evaluation.data import read_beir, read_classification, read_labelled, read_sts
from lengthwise.evaluation.retrieval import RetrievalConfig, evaluate_retrieval
from lengthwise.evaluation.sts import evaluate_sts

__all__ = [
    "ClassificationConfig",
    "LengthBins",
    "RetrievalConfig",
    "evaluate_classification",
    "evaluate_retrieval",
    "evaluate_sts",
    "read_beir",
    "read_classification",
    "read_labelled",
    "read_sts",
]
