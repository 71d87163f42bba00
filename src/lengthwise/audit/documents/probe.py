"""The length probe as the audit reports it, and the truncation table: pure functions on arrays.

The probe regresses the token count the model read on the pooled embedding (length-attack App. D). Where most
documents are cut at the window, that count is mostly the window itself and least squares overfits when a
fold holds fewer texts than the embedding has dimensions: a held-out news collection, 95 % cut, gave
OLS R² × 100 = −544 and ridge −3.4. So ridge is the headline, the share cut stands next to it, and the
section says in words when the figure cannot be read as "how well length is encoded".
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from lengthwise.audit.config import DocAuditConfig
from lengthwise.audit.documents import metrics as dg

__all__ = ["MIN_RELATIVE_STD", "WARN_CUT_SHARE", "probe_section", "truncation_section"]

WARN_CUT_SHARE = 0.5  # at least this share cut at the window: the target is mostly the window itself
MIN_RELATIVE_STD = 0.1  # std / mean of the lengths the model read below this: too little length left to predict
WINDOW_MULTIPLES = (1, 2, 4, 8)  # truncation table: ≤ W, W–2W, 2W–4W, 4W–8W, > 8W content tokens


def probe_section(embeddings: np.ndarray, lengths: np.ndarray, cut: np.ndarray, config: DocAuditConfig) -> dict:
    """The ``probe`` section: ridge R² × 100 (the headline), least squares (the paper's), the share of texts cut
    at the window, and warnings. `embeddings` (n, D), `lengths` (n,) tokens read, `cut` (n,) bool."""
    n, folds = len(lengths), config.probe_folds
    cut_share = float(np.mean(cut)) if n else 0.0
    if n < 2 * folds:
        return {"skipped": f"{n} documents; the {folds}-fold probe needs at least {2 * folds}", "n": n}
    if np.ptp(lengths) == 0:
        reason = "every document has the same token count (e.g. all cut by first_k or at the window)"
        return {"skipped": reason, "n": n, "truncated_share": cut_share}
    ols, ridge = (
        dg.length_probe_r2(embeddings, lengths, folds=folds, seed=config.seed, regressor=regressor)
        for regressor in ("linear", "ridge")
    )
    section: dict[str, Any] = {
        "headline": "ridge",
        "ridge_r2x100_mean": ridge.mean,
        "ridge_r2x100_std": ridge.std,
        "r2x100_mean": ols.mean,
        "r2x100_std": ols.std,
        "folds": list(ols.folds),
        "n": n,
        "truncated_share": cut_share,
        "length_relative_std": float(np.std(lengths) / np.mean(lengths)),
        "target": "content tokens the model read (after truncation)",
        "regressor": "ridge (RidgeCV, headline); r2x100_*: OLS as in the paper",
        "warnings": _warnings(n, folds, embeddings.shape[1], cut_share, float(np.std(lengths) / np.mean(lengths))),
    }
    return section


def _warnings(n: int, folds: int, dim: int, cut_share: float, relative_std: float) -> list[str]:
    out = []
    if cut_share >= WARN_CUT_SHARE:
        out.append(
            f"{cut_share:.0%} of the documents are cut at the window, so the length the model read is mostly the "
            "window itself; the probe says little about how length is encoded"
        )
    elif relative_std < MIN_RELATIVE_STD:
        out.append(
            f"the lengths vary little (std {relative_std:.0%} of the mean) after truncation; the probe has almost "
            "nothing to predict"
        )
    per_fold = n * (folds - 1) // folds
    if per_fold < dim:
        out.append(
            f"{per_fold} training texts per fold for {dim} embedding dimensions: least squares can fit noise "
            "(its R² can fall far below 0), so ridge is the figure to read"
        )
    return out


def truncation_section(full_lengths: np.ndarray, window: int) -> dict[str, Any]:
    """How much the window cuts: documents and content tokens beyond `window` tokens, overall and per length bin
    (bins in multiples of the window: ≤ W, W–2W, 2W–4W, 4W–8W, > 8W). `full_lengths` (n,) before truncation."""
    lengths = np.asarray(full_lengths, dtype=np.int64)
    beyond = np.clip(lengths - window, 0, None)  # (n,) tokens the model never reads

    def stats(mask: np.ndarray) -> dict[str, Any]:
        count, tokens = int(mask.sum()), int(lengths[mask].sum())
        row: dict[str, Any] = {"count": count}
        if count:
            cut, lost = int((lengths[mask] > window).sum()), int(beyond[mask].sum())
            row.update(cut=cut, cut_share=cut / count, tokens=tokens, tokens_beyond_window=lost)
            row["tokens_beyond_share"] = lost / tokens if tokens else 0.0
        return row

    edges = [m * window for m in WINDOW_MULTIPLES]
    labels = [f"1–{edges[0]}"] + [f"{lo + 1}–{hi}" for lo, hi in pairwise(edges)]
    labels.append(f">{edges[-1]}")
    index = np.searchsorted(np.asarray(edges), lengths, side="left")  # (n,) 0 = fits the window
    overall = stats(np.ones(len(lengths), dtype=bool))
    return {
        "window": window,
        "n_docs": overall["count"],
        "cut": overall.get("cut", 0),
        "cut_share": overall.get("cut_share", 0.0),
        "tokens": overall.get("tokens", 0),
        "tokens_beyond_window": overall.get("tokens_beyond_window", 0),
        "tokens_beyond_share": overall.get("tokens_beyond_share", 0.0),
        "by_bin": [{"bin": label, **stats(index == i)} for i, label in enumerate(labels)],
    }
