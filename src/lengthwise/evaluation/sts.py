"""Semantic textual similarity: Spearman and Pearson (×100) of cosine against gold, as MTEB scores it.

MTEB v2's main STS score is ``cosine_spearman``: Spearman's rank correlation between gold scores and the cosine of
the two embeddings, over *all* pairs of the split at once (STS12–16 are pooled across subsets, not averaged).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import pearsonr, spearmanr

from lengthwise.core.bins import LengthBins, per_bin, token_lengths
from lengthwise.core.data import PairSet
from lengthwise.core.embed import TokenView
from lengthwise.core.encoder import TextEncoder
from lengthwise.core.errors import DataFormatError
from lengthwise.core.scoring import paired_cosine
from lengthwise.evaluation.schema import STSRecord

__all__ = ["STSResult", "correlations", "evaluate_sts"]

MIN_PAIRS_PER_BIN = 3  # a rank correlation of fewer pairs is meaningless


def correlations(predicted: np.ndarray, gold: np.ndarray) -> dict[str, float | None]:
    """Spearman and Pearson ×100 of `predicted` against `gold` ((n,) each); None below 3 pairs or for constants."""
    if len(gold) < MIN_PAIRS_PER_BIN or np.ptp(gold) == 0 or np.ptp(predicted) == 0:
        return {"spearman": None, "pearson": None}
    return {
        "spearman": 100.0 * float(spearmanr(gold, predicted)[0]),
        "pearson": 100.0 * float(pearsonr(gold, predicted)[0]),
    }


@dataclass(frozen=True)
class STSResult:
    """Scores ×100 over all pairs and per length bin of the pair's longer text."""

    scores: dict[str, float | None]
    n_pairs: int
    bins: list[dict[str, Any]] = field(default_factory=list)
    bin_spec: dict[str, Any] | None = None
    subsets: dict[str, dict[str, Any]] = field(default_factory=dict)
    cosines: np.ndarray | None = field(default=None, repr=False, compare=False)  # (n,) per pair, for paired tests

    def to_dict(self) -> STSRecord:
        return {
            "scores": dict(self.scores),
            "n_pairs": self.n_pairs,
            "subsets": self.subsets,
            "bins": {"by": "longer text of the pair", "spec": self.bin_spec, "rows": self.bins},
        }


def evaluate_sts(
    encoder: TextEncoder,
    pairs: PairSet,
    *,
    view: TokenView | None = None,
    bins: LengthBins | None = None,
    batch_size: int = 32,
    show_progress: bool = False,
) -> STSResult:
    """Embed each distinct text once, score cosine against gold; bin pairs by ``max(n1, n2)`` when `view` is given.

    Subsets (a pair's `kind`, e.g. STS12's MSRpar) are also scored on their own; the headline score pools them.
    """
    gold = np.asarray([pair.score for pair in pairs.pairs], dtype=np.float64)
    if np.isnan(gold).any():
        raise DataFormatError(None, None, f"{pairs.source}: every pair needs a gold score for STS")
    unique = list(dict.fromkeys(text for pair in pairs.pairs for text in (pair.text1, pair.text2)))
    position = {text: i for i, text in enumerate(unique)}
    embeddings = encoder.encode(unique, batch_size=batch_size, show_progress=show_progress)  # (U, D)
    first = embeddings[[position[pair.text1] for pair in pairs.pairs]]
    second = embeddings[[position[pair.text2] for pair in pairs.pairs]]
    cosine = paired_cosine(first, second)  # (n,)
    kinds = np.asarray([pair.kind or "" for pair in pairs.pairs])
    subsets = {
        str(kind): {"n_pairs": int((kinds == kind).sum()), **correlations(cosine[kinds == kind], gold[kinds == kind])}
        for kind in dict.fromkeys(kinds.tolist())
        if kind
    }
    rows: list[dict[str, Any]] = []
    if view is not None:
        bins = bins or LengthBins.for_view(view)
        lengths = token_lengths(view, unique)
        longer = np.maximum(
            lengths[[position[p.text1] for p in pairs.pairs]], lengths[[position[p.text2] for p in pairs.pairs]]
        )
        rows = per_bin(bins, bins.assign(longer), lambda mask: correlations(cosine[mask], gold[mask]))
    return STSResult(
        scores=correlations(cosine, gold),
        n_pairs=len(pairs),
        bins=rows,
        bin_spec=bins.describe() if (view is not None and bins is not None) else None,
        subsets=subsets,
        cosines=cosine,
    )
