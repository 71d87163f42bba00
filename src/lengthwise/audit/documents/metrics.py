"""Length diagnostics of METHODS §1 as pure functions: arrays or tensors in, numbers out.

Pooled-embedding measures take numpy arrays (n, D); token-level measures take the model's tensors
(hidden states (B, T, D), attentions (B, H, T, T)) with the attention mask, so a caller can stream
batches through them and keep only the numbers. No model, no I/O, no logging here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from lengthwise.core.errors import DataFormatError, SettingError

__all__ = [
    "CosineMoments",
    "LayerTokenStats",
    "ProbeScore",
    "adjusted_intra_similarity",
    "alignment",
    "anisotropy",
    "attention_filter_rate",
    "batch_filter_rates",
    "elongation_isotropy",
    "intra_document_similarity",
    "length_collapse",
    "length_probe_r2",
    "pooled_isotropy",
    "token_unit_sums",
    "uniformity",
]


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm, in float64; zero rows stay zero. (n, D) → (n, D)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0:
        raise SettingError("embeddings", x.shape, "expected a non-empty (n, D) array")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


@dataclass(frozen=True)
class CosineMoments:
    """Sufficient statistics for the exact mean cosine over all pairs of vectors from *different* groups.

    With unit vectors u, group sums s_g and sizes n_g: mean = (‖Σ_g s_g‖² − Σ_g ‖s_g‖²) / (N² − Σ_g n_g²).
    This is the expectation of "cosine of a random pair from different groups", computed without sampling
    and without keeping the vectors; moments of disjoint batches add with ``+``.
    """

    total: np.ndarray  # (D,) sum of all unit vectors
    within_sq: float  # Σ_g ‖s_g‖²
    count: int  # N
    within_pairs: float  # Σ_g n_g²

    @classmethod
    def from_groups(cls, group_sums: np.ndarray, group_counts: np.ndarray) -> CosineMoments:
        """Moments from per-group sums of unit vectors (G, D) and group sizes (G,)."""
        sums = np.asarray(group_sums, dtype=np.float64)
        counts = np.asarray(group_counts, dtype=np.float64)
        if sums.ndim != 2 or counts.shape != (sums.shape[0],):
            raise SettingError("group_counts", counts.shape, f"expected (G,) counts for (G, D) group_sums {sums.shape}")
        return cls(sums.sum(axis=0), float((sums**2).sum()), int(counts.sum()), float((counts**2).sum()))

    def __add__(self, other: CosineMoments) -> CosineMoments:
        return CosineMoments(
            self.total + other.total,
            self.within_sq + other.within_sq,
            self.count + other.count,
            self.within_pairs + other.within_pairs,
        )

    def mean_cosine(self) -> float:
        """Mean cosine over ordered pairs from different groups; `SettingError` with fewer than two groups."""
        pairs = float(self.count) ** 2 - self.within_pairs
        if pairs <= 0:
            raise SettingError(None, None, "mean cosine across groups needs vectors from at least two groups")
        return float((self.total @ self.total - self.within_sq) / pairs)


def anisotropy(embeddings: np.ndarray, groups: np.ndarray | None = None) -> float:
    """Mean cosine of all pairs of distinct rows (only pairs from different `groups` when given).

    The exact value of "mean cosine of random pairs": 0 for isotropic directions, 1 when all rows point
    one way. (n, D) → float; needs n ≥ 2 (and two groups).
    """
    units = _unit_rows(embeddings)
    if groups is None:
        return CosineMoments.from_groups(units, np.ones(len(units))).mean_cosine()
    labels, inverse = np.unique(np.asarray(groups), return_inverse=True)
    sums = np.zeros((len(labels), units.shape[1]))
    np.add.at(sums, inverse, units)
    return CosineMoments.from_groups(sums, np.bincount(inverse, minlength=len(labels))).mean_cosine()


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Wang & Isola (2020) alignment: mean ‖x̂ᵢ − ŷᵢ‖^α over positive pairs (rows of x and y), unit-normed.

    0 when every pair coincides, 2^α for opposite vectors. Lower is better aligned.
    """
    ux, uy = _unit_rows(x), _unit_rows(y)
    if ux.shape != uy.shape:
        raise SettingError("y", uy.shape, f"alignment needs the shape of x {ux.shape}")
    return float(np.mean(np.linalg.norm(ux - uy, axis=1) ** alpha))


def uniformity(x: np.ndarray, t: float = 2.0, chunk: int = 256) -> float:
    """Wang & Isola (2020) uniformity: log mean over pairs i<j of exp(−t‖x̂ᵢ − x̂ⱼ‖²), unit-normed rows.

    Exact over all n(n−1)/2 pairs, computed in row chunks so memory stays O(chunk · n). 0 when all rows
    coincide; more negative is more uniform (−4 for t=2 is the limit for many vectors on a sphere).
    """
    units = _unit_rows(x)
    n = len(units)
    if n < 2:
        raise SettingError("len(x)", n, "uniformity needs at least 2 embeddings")
    total = 0.0
    for start in range(0, n, chunk):
        block = units[start : start + chunk]  # (c, D)
        sq_dist = np.clip(2.0 - 2.0 * (block @ units.T), 0.0, None)  # (c, n)
        rows = np.arange(start, start + len(block))
        upper = np.arange(n)[None, :] > rows[:, None]  # pairs i < j only
        total += float(np.exp(-t * sq_dist)[upper].sum())
    return float(np.log(total / (n * (n - 1) / 2)))


def pooled_isotropy(embeddings: np.ndarray) -> dict[str, float | None]:
    """Anisotropy (mean pairwise cosine) and uniformity of pooled embeddings (n, D); None for n < 2."""
    if len(embeddings) < 2:
        return {"anisotropy": None, "uniformity": None}
    return {"anisotropy": anisotropy(embeddings), "uniformity": uniformity(embeddings)}


def elongation_isotropy(original: np.ndarray, elongated: np.ndarray) -> dict[str, object]:
    """Isotropy of the same texts before and after elongation, with the pairs (g(S), g(f(S, m))) as positives:
    Wang–Isola alignment and the mean cosine of each text with its elongated self. Both (n, D), n ≥ 2."""
    units_o, units_e = _unit_rows(original), _unit_rows(elongated)
    if units_o.shape != units_e.shape:
        raise SettingError("elongated", units_e.shape, f"does not match original {units_o.shape}")
    return {
        "original": pooled_isotropy(original),
        "elongated": pooled_isotropy(elongated),
        "alignment": alignment(units_o, units_e),
        "self_cosine_mean": float(np.einsum("nd,nd->n", units_o, units_e).mean()),
    }


def length_collapse(embeddings: np.ndarray, bins: np.ndarray) -> list[dict[str, float | int | None]]:
    """Per length bin: mean pairwise cosine within the bin and mean Euclidean distance to the global centroid.

    `embeddings` (n, D) as the model returns them; `bins` (n,) integer bin labels. The centroid is the
    mean of all n embeddings. One row per distinct label, sorted; a bin with one text has ``mean_cosine``
    None. Length collapse shows as cosine rising and distance falling with length.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    labels = np.asarray(bins)
    if x.ndim != 2 or labels.shape != (len(x),):
        raise SettingError("bins", labels.shape, f"expected (n,) bins for (n, D) embeddings, got embeddings {x.shape}")
    distances = np.linalg.norm(x - x.mean(axis=0), axis=1)  # (n,)
    rows: list[dict[str, float | int | None]] = []
    for label in np.unique(labels):
        members = labels == label
        count = int(members.sum())
        rows.append(
            {
                "bin": int(label),
                "n": count,
                "mean_cosine": anisotropy(x[members]) if count >= 2 else None,
                "mean_distance_to_centroid": float(distances[members].mean()),
            }
        )
    return rows


@dataclass(frozen=True)
class ProbeScore:
    """Cross-validated R² × 100 of a linear probe: mean and (population) std over the folds."""

    mean: float
    std: float
    folds: tuple[float, ...]


def length_probe_r2(
    embeddings: np.ndarray,
    lengths: np.ndarray,
    *,
    folds: int = 5,
    seed: int = 0,
    regressor: Literal["linear", "ridge"] = "linear",
) -> ProbeScore:
    """How linearly the embeddings encode text length (length-attack App. D): k-fold R² × 100.

    ``linear`` is ordinary least squares as in the paper; ``ridge`` picks the penalty by inner CV
    (safer when there are fewer texts per fold than dimensions). Folds are shuffled with `seed`.
    """
    from sklearn.linear_model import LinearRegression, RidgeCV
    from sklearn.model_selection import KFold, cross_val_score

    x = np.asarray(embeddings, dtype=np.float64)
    y = np.asarray(lengths, dtype=np.float64)
    if x.ndim != 2 or y.shape != (len(x),):
        raise SettingError("lengths", y.shape, f"expected (n,) lengths for (n, D) embeddings, got embeddings {x.shape}")
    if folds < 2 or len(x) < 2 * folds:
        raise SettingError(
            "folds", folds, f"the length probe needs at least 2 folds and {2 * folds} texts, got {len(x)}"
        )
    if np.ptp(y) == 0:
        raise DataFormatError(None, None, "the length probe needs texts of different lengths; all have one token count")
    model = LinearRegression() if regressor == "linear" else RidgeCV(alphas=np.logspace(-3, 3, 13))
    cv = KFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = 100.0 * cross_val_score(model, x, y, cv=cv, scoring="r2")
    return ProbeScore(float(scores.mean()), float(scores.std()), tuple(float(s) for s in scores))


def _check_states(states: torch.Tensor, mask: torch.Tensor) -> None:
    if states.ndim != 3 or mask.shape != states.shape[:2]:
        raise SettingError(
            "mask", tuple(mask.shape), f"expected states (B, T, D) and mask (B, T), got {tuple(states.shape)}"
        )


def intra_document_similarity(states: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
    """Per document: mean cosine between each token vector and the document's mean-pooled vector.

    `states` (B, T, D) one layer's hidden states, `mask` (B, T) 1 for real tokens (padding excluded; special
    tokens count, as in the model's mean pooling). Returns (B,) float64 (laser3 PoC 2, before adjustment).
    """
    _check_states(states, mask)
    weights = mask.to(torch.float64).unsqueeze(-1)  # (B, T, 1)
    h = states.to(torch.float64)
    pooled = (h * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1.0)  # (B, D)
    cos = torch.nn.functional.cosine_similarity(h, pooled.unsqueeze(1), dim=-1, eps=1e-12)  # (B, T)
    return ((cos * weights.squeeze(-1)).sum(dim=1) / weights.squeeze(-1).sum(dim=1).clamp_min(1.0)).cpu().numpy()


def token_unit_sums(states: torch.Tensor, mask: torch.Tensor) -> CosineMoments:
    """Cross-document token cosine moments of one batch: each document is a group of unit token vectors.

    ``token_unit_sums(...).mean_cosine()`` (summed over batches) is the layer's anisotropy estimate: the
    mean cosine of token pairs from different documents. (B, T, D), (B, T) → `CosineMoments`.
    """
    _check_states(states, mask)
    h = states.to(torch.float64)
    units = torch.nn.functional.normalize(h, dim=-1) * mask.to(torch.float64).unsqueeze(-1)  # (B, T, D)
    return CosineMoments.from_groups(units.sum(dim=1).cpu().numpy(), mask.sum(dim=1).cpu().numpy())


def adjusted_intra_similarity(intra: np.ndarray, token_anisotropy: float) -> float:
    """Mean intra-document similarity minus the layer's anisotropy estimate (laser3 PoC 2, footnote 1)."""
    values = np.asarray(intra, dtype=np.float64)
    if values.size == 0:
        raise SettingError("intra", [], "no intra-document similarities to average")
    return float(values.mean() - token_anisotropy)


class LayerTokenStats:
    """Streaming per-layer token statistics of a document collection (laser3 PoC 2).

    For each document: its intra-document similarity at every layer; for each layer: cross-document token
    cosine moments (the anisotropy estimate). Feed batches with `add`; nothing token-level is kept.
    """

    def __init__(self, n_docs: int) -> None:
        self.intra = np.zeros((n_docs, 0))  # (n_docs, L + 1), filled as batches arrive
        self.moments: list[CosineMoments] = []

    def add(self, rows: np.ndarray, hidden: Sequence[torch.Tensor], mask: torch.Tensor, keep: np.ndarray) -> None:
        """Add one batch: `hidden` L + 1 tensors (B, T, D), `mask` (B, T); documents where `keep` (B,) is True
        are stored at positions `rows` (B,)."""
        if not keep.any():
            return
        if self.intra.shape[1] == 0:
            self.intra = np.full((len(self.intra), len(hidden)), np.nan)
        keep_t = torch.as_tensor(keep, device=mask.device)
        for layer, states in enumerate(hidden):
            self.intra[rows[keep], layer] = intra_document_similarity(states[keep_t], mask[keep_t])
            moments = token_unit_sums(states[keep_t], mask[keep_t])
            self.moments[layer : layer + 1] = [self.moments[layer] + moments if layer < len(self.moments) else moments]

    def summary(self, selection: np.ndarray | slice = slice(None)) -> dict[str, object]:
        """Per layer: mean intra similarity over the selected documents, the layer's token anisotropy
        (over all documents added), and the adjusted value = intra − anisotropy."""
        intra = self.intra[selection].mean(axis=0)
        aniso = np.array([m.mean_cosine() for m in self.moments])
        adjusted = [adjusted_intra_similarity(self.intra[selection][:, i], a) for i, a in enumerate(aniso)]
        return {
            "n": len(self.intra[selection]),
            "intra": intra.tolist(),
            "anisotropy": aniso.tolist(),
            "adjusted": adjusted,
        }


def _largest_singular_values(attention: torch.Tensor) -> torch.Tensor:
    """σ_max of (I − 11ᵀ/n) A for each trailing (n, n) matrix, via the top eigenvalue of its Gram matrix."""
    a = attention.to(torch.float64)
    high = a - a.mean(dim=-2, keepdim=True)  # (I − 11ᵀ/n) A: subtract each column's mean, (..., n, n)
    gram = high.transpose(-1, -2) @ high  # (..., n, n), symmetric PSD
    return torch.linalg.eigvalsh(gram)[..., -1].clamp_min(0.0).sqrt()


def attention_filter_rate(attention: torch.Tensor) -> float:
    """σ_a (length-collapse Thm 2): largest singular value of (I − 11ᵀ/n) A, averaged over heads.

    `attention` (n, n) or (H, n, n), rows summing to 1. 0 for uniform attention (everything low-pass),
    1 for the identity; smaller means stronger low-pass filtering.
    """
    if attention.ndim not in (2, 3) or attention.shape[-1] != attention.shape[-2]:
        raise SettingError("attention", tuple(attention.shape), "expected an (n, n) or (H, n, n) attention matrix")
    return float(_largest_singular_values(attention).mean())


def batch_filter_rates(attention: torch.Tensor, lengths: Sequence[int]) -> np.ndarray:
    """σ_a per sequence of a padded batch: `attention` (B, H, T, T), `lengths` (B,) real tokens → (B,).

    Each sequence's matrix is cut to its first ``lengths[b]`` queries and keys (padding gets no attention).
    """
    if attention.ndim != 4 or len(lengths) != attention.shape[0]:
        raise SettingError("attention", tuple(attention.shape), f"expected (B, H, T, T) for B = {len(lengths)} lengths")
    return np.array([attention_filter_rate(attention[b, :, :n, :n]) for b, n in enumerate(lengths)])
