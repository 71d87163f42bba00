"""The report stage of `vanilla_arms.py` (issue 37, parts 2–3): every arm against SimCSE over the seeds, and each
paper's claim this study can test, answered with a verdict.

**Intervals.** Every Δ is "arm minus the SimCSE run of the same training seed" (same texts, steps, batch order), on
the same items: STS pairs, attack pairs, same-topic SciFact pairs, long STS pairs, SciFact queries. The seeds are
combined by resampling the items jointly — one resample of item indices serves every seed and both models — and
taking the mean over seeds of the per-seed difference (`lengthwise.core.stats.paired_bootstrap`, ``paired=True``,
percentile method, 2,000 resamples, seed 0). The interval therefore covers the sampling of items given these training
runs; the seed-to-seed spread is not in it, which is why each seed's own Δ and point values are reported beside it.
The STS12–16 and seven-task averages resample the union of their tasks' pairs, each resample scoring every task on
its own rows and averaging the Spearmans (as study 1 at scale). The attack's JSD is recomputed from the resampled
pairs' cosines before and after (100 bins, as the audit); its permutation null (1,000 within-pair swaps) is the
audit's, per run. The first-k summary is the mean over k < N of the JSD between the first-k cosines and the
full-window cosines (the audit's ``js_distance_vs_full``), on the same-topic SciFact pairs. Training cost is the
ratio of seconds per step, arm / SimCSE, per seed; with one number per run there is nothing to resample, so its
"interval" is the range over seeds. It compares only runs timed in one queue session (`timing_session`, recorded
by `run-all` since 27 November, after the first seeds had run on hosts of different speed): a ratio across
sessions measures the hosts as much as the arms.

**Verdict rule** (written before any result of this study existed). Each claim names an arm, a metric and the claimed
relation of the arm to SimCSE:

- ``+`` (above SimCSE) or ``-`` (below it: distances, times): "reproduced in direction" when the 95 % interval lies
  entirely on the claimed side of 0, "not reproduced (opposite direction)" when it lies entirely on the other side,
  else "inconclusive at this scale";
- ``>=`` with a margin δ (at or above; non-inferiority): "reproduced (not below SimCSE by δ or more)" when the
  interval's low end is above −δ, "not reproduced (below SimCSE by more than δ)" when its high end is below −δ, else
  "inconclusive at this scale";
- ``~`` with a margin δ (on par): "reproduced (within ±δ)" when the interval lies inside (−δ, δ), "not reproduced
  (outside ±δ)" when it lies entirely outside it, else "inconclusive at this scale";
- a claim whose arm, SimCSE or metric has no record is "not measured"; with fewer than 3 seeds the verdict says on
  how many seeds it rests.

Margins are in the metric's unit (Spearman × 100): δ = 1.0 for "at or above" (HiCL's own 3-seed SimCSE baselines
vary by 1–2 points, Table 15) and δ = 1.5 for LA(SER)³'s "roughly on par" on STS-B (the paper's own gap, 75.61 vs
76.85, is 1.24). Only the direction is judged, never the size of the paper's figure: the papers train BERT-base-size
encoders on 10^5–10^6 texts, this study a small encoder pretrained here (the scale is printed from the run records
above the table), so "not reproduced" and "inconclusive" are statements at that scale.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ARMS, SEEDS
from _common import EVAL_PARTS as PARTS

REPO = Path(__file__).resolve().parents[1]
BASE = "simcse"
QUALITY_STS = ("STS12", "STS13", "STS14", "STS15", "STS16")
SEVEN_STS = (*QUALITY_STS, "STS-B", "SICK-R")
RESAMPLES = 2000

# Each paper's central claim that this study can test (read from ../shared/papers/*.txt): the paper's figure, where
# it is, the metric here and the claimed relation of the arm to SimCSE (see the verdict rule above).
CLAIMS: list[dict[str, Any]] = [
    {
        "paper": "LA(SER)³ (Xiao et al., length is a curse and a blessing)",
        "claim": "Self-reference beats SimCSE on long texts; the gain grows with document length",
        "paper_figure": "BEIR-14 mean nDCG@10 0.1263 → 0.1816 (+43.8 %), SciFact 0.2174 → 0.3525 (MiniLM-L6 from "
        "vanilla, wiki 1M sentences, N = 256)",
        "source": "Table 2 (self-reference, trained on wiki); §4 Results (gain larger on long-document sets)",
        "our_metric": "long STS (10 STS-B test pairs per pair) Spearman × 100",
        "arm": "laser-self",
        "metric": "long_sts",
        "relation": "+",
    },
    {
        "paper": "LA(SER)³ (Xiao et al., length is a curse and a blessing)",
        "claim": "Self-reference beats SimCSE on long-document retrieval",
        "paper_figure": "SciFact nDCG@10 0.2174 → 0.3525 (MiniLM-L6, wiki); 0.2492 → 0.4317 (BERT-base, Table 1)",
        "source": "Table 2; Table 1",
        "our_metric": "SciFact test nDCG@10 × 100 (window N; only with eval --scifact)",
        "arm": "laser-self",
        "metric": "scifact",
        "relation": "+",
    },
    {
        "paper": "LA(SER)³ (Xiao et al., length is a curse and a blessing)",
        "claim": "On short texts (STS-B) self-reference stays roughly on par with SimCSE",
        "paper_figure": "STS-B 75.61 (LA(SER)³-mean, N = 256) vs 76.85 (SimCSE, N = 32), BERT-base",
        "source": "Appendix A, Table 5",
        "our_metric": "STS-B test Spearman × 100",
        "arm": "laser-self",
        "metric": "stsb",
        "relation": "~",
        "margin": 1.5,
    },
    {
        "paper": "LA(SER)³ (Xiao et al., length is a curse and a blessing)",
        "claim": "Intra-reference beats SimCSE (and its own COCO-DR PT-unsup baseline) on long-document retrieval",
        "paper_figure": "BEIR-14 mean nDCG@10: SimCSE 0.1177, COCO-DR PT-unsup 0.1915, intra-reference 0.2087; "
        "SciFact 0.2330 / 0.4056 / 0.4076 (MiniLM-L6, MSMARCO)",
        "source": "Table 2 (trained on MSMARCO); §4 (intra-ref largely outperforms self-ref on MiniLM-L6)",
        "our_metric": "long STS Spearman × 100",
        "arm": "laser-intra",
        "metric": "long_sts",
        "relation": "+",
    },
    {
        "paper": "LA(SER)³ (Xiao et al., length is a curse and a blessing)",
        "claim": "Intra-reference beats SimCSE on long-document retrieval",
        "paper_figure": "SciFact nDCG@10 0.2330 (SimCSE) → 0.4076 (intra-reference), MiniLM-L6, MSMARCO",
        "source": "Table 2",
        "our_metric": "SciFact test nDCG@10 × 100 (only with eval --scifact)",
        "arm": "laser-intra",
        "metric": "scifact",
        "relation": "+",
    },
    {
        "paper": "HiCL (hierarchical contrastive learning)",
        "claim": "HiCL on SimCSE is at or above SimCSE on the seven STS tasks",
        "paper_figure": "SimCSE-BERT-base 74.00 → 75.54 (one seed); 74.53 ± 1.8 → 74.75 ± 0.7 (3 seeds)",
        "source": "Table 1; Table 15 (3 runs)",
        "our_metric": "mean Spearman × 100 of STS12–16, STS-B, SICK-R",
        "arm": "hicl",
        "metric": "sts7_avg",
        "relation": ">=",
        "margin": 1.0,
    },
    {
        "paper": "HiCL (hierarchical contrastive learning)",
        "claim": "HiCL's gain is larger on long test texts",
        "paper_figure": "IMDB 60.93 → 63.20, Yelp 70.99 → 72.96 (SimCSE-BERT-base, texts of 229 / 133 words)",
        "source": "§5.6, Table 8",
        "our_metric": "long STS Spearman × 100",
        "arm": "hicl",
        "metric": "long_sts",
        "relation": "+",
    },
    {
        "paper": "HiCL (hierarchical contrastive learning)",
        "claim": "HiCL trains faster than SimCSE at the same truncation on long inputs (segments of 32 tokens)",
        "paper_figure": "87.5 → 69.4 training minutes (BERT-base, truncation 512)",
        "source": "§3.3; Appendix A.1, Table 12",
        "our_metric": "seconds per training step, HiCL / SimCSE − 1 (N = 256; range over seeds)",
        "arm": "hicl",
        "metric": "s_per_step_ratio",
        "relation": "-",
    },
    {
        "paper": "SimDE (simple contrastive learning for document embeddings)",
        "claim": "Splitting documents into two sentence sets gives better document embeddings than SimCSE",
        "paper_figure": "+3.9 % mean macro-F1 over 5 document classification sets (e.g. 20News F1 72.57 → 74.85), "
        "BERT-base",
        "source": "§3.4, Table 2",
        "our_metric": "long STS Spearman × 100",
        "arm": "simde",
        "metric": "long_sts",
        "relation": "+",
    },
    {
        "paper": "SimDE (simple contrastive learning for document embeddings)",
        "claim": "SimDE beats SimCSE on document retrieval",
        "paper_figure": "AAN citation retrieval 54.78 (SimCSE) → 58.29 (SimDE-BERT)",
        "source": "§3.6, Table 3",
        "our_metric": "SciFact test nDCG@10 × 100 (only with eval --scifact)",
        "arm": "simde",
        "metric": "scifact",
        "relation": "+",
    },
    {
        "paper": "Copy-and-concat (can text encoders be deceived by length attack?)",
        "claim": "Length-adversarial (copy-and-concat) training removes the attack's similarity shift",
        "paper_figure": "JSD 0.67 → 0.068 (MiniLM, mean pooling, 1 epoch; QQP → ArguAna first 64 tokens × 8)",
        "source": "Table 1 (left)",
        "our_metric": "STS-B test attack m = 100: JSD before/after",
        "arm": "copy-concat",
        "metric": "attack_jsd",
        "relation": "-",
    },
    {
        "paper": "Copy-and-concat (can text encoders be deceived by length attack?)",
        "claim": "After copy-and-concat the first-k (semantic-altered) similarity distributions shift less",
        "paper_figure": "Figure 5 only (no number)",
        "source": "Appendix F, Figure 5",
        "our_metric": "first-k curve: mean JSD(first-k, full window) over k < N, SciFact same-topic pairs",
        "arm": "copy-concat",
        "metric": "first_k_jsd",
        "relation": "-",
    },
    {
        "paper": "lengthwise's own length-invariant objective (no paper)",
        "claim": "Self-referenced invariance + batch consistency takes the attack's JSD to its permutation null",
        "paper_figure": "study 7 arm self-w1-c4 from all-MiniLM-L6-v2: JSD 0.122 / 0.119 / 0.126 vs null q95 "
        "0.129 / 0.131 / 0.129 (3 of 3 seeds within the null)",
        "source": "docs/results/README.md, study 7; docs/training.md, recipe length-invariant (here without retention)",
        "our_metric": "STS-B test attack m = 100: JSD before/after (null per seed in the per-seed table)",
        "arm": "length-invariant",
        "metric": "attack_jsd",
        "relation": "-",
    },
    {
        "paper": "lengthwise's own length-invariant objective (no paper)",
        "claim": "... while STS-B quality holds",
        "paper_figure": "study 7 self-w1-c4: STS-B −0.98 / −1.03 / −1.40 vs the unchanged model (82.03)",
        "source": "docs/results/README.md, study 7",
        "our_metric": "STS-B test Spearman × 100",
        "arm": "length-invariant",
        "metric": "stsb",
        "relation": ">=",
        "margin": 1.0,
    },
]

LABELS = {
    "stsb": "STS-B",
    "sts12_16_avg": "STS12–16 avg",
    "sick_r": "SICK-R",
    "sts7_avg": "7-task avg",
    "long_sts": "long STS",
    "attack_shift": "attack shift",
    "attack_jsd": "attack JSD",
    "first_k_jsd": "first-k JSD",
    "scifact": "SciFact nDCG@10",
    "s_per_step_ratio": "s/step ÷ SimCSE − 1",
}
DIGITS = {"attack_shift": 4, "attack_jsd": 3, "first_k_jsd": 3, "s_per_step_ratio": 2}


# ----------------------------------------------------------------------------------------------------- statistics
#
# A bootstrap resample of n items is a count c_j ≥ 0 per item (Σ c = n). Every statistic here is written as a function
# of those counts on the full-data arrays — a weighted mean, a weighted histogram, weighted ranks — which gives exactly
# what the statistic gives on the resampled arrays (ties among repeated items averaged, as `scipy.stats.rankdata`),
# without sorting or copying per resample. `paired_bootstrap` resamples the item ids; the counts come from them.

Counted = Callable[[np.ndarray], float]  # counts per item (all ones: the data itself) → one seed's difference
EDGES = np.linspace(-1.0, 1.0, 101)  # the audit's histogram: 100 bins over [-1, 1], values clipped into the ends


def _groups(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Each item's index among the distinct values in ascending order, and how many distinct values there are."""
    distinct, inverse = np.unique(np.asarray(values, dtype=float), return_inverse=True)
    return inverse.ravel(), len(distinct)


def _weighted_ranks(groups: tuple[np.ndarray, int], counts: np.ndarray) -> np.ndarray:
    """Each item's average rank in the multiset where item j appears counts[j] times."""
    inverse, size = groups
    per_value = np.bincount(inverse, weights=counts, minlength=size)
    below = np.cumsum(per_value) - per_value
    return (below + (per_value + 1.0) / 2.0)[inverse]


def _weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> float:
    total = w.sum()
    if total <= 0:
        return float("nan")
    dx, dy = x - (w @ x) / total, y - (w @ y) / total
    norm = math.sqrt(float(w @ (dx * dx)) * float(w @ (dy * dy)))
    return float(w @ (dx * dy)) / norm if norm > 0 else float("nan")


def _spearman(x: np.ndarray, y: np.ndarray, counts: np.ndarray | None = None) -> float:
    """Spearman's rho × 100 of x and y (each item weighted by its bootstrap count); NaN for a constant side."""
    w = np.ones(len(x)) if counts is None else counts
    rx, ry = _weighted_ranks(_groups(x), w), _weighted_ranks(_groups(y), w)
    return 100.0 * _weighted_pearson(rx, ry, w)


def _bins(values: Sequence[float]) -> np.ndarray:
    """Each value's bin of the audit's histogram (`np.histogram`'s own binning: right edge in the last bin)."""
    clipped = np.clip(np.asarray(values, dtype=float), -1.0, 1.0)
    index = np.searchsorted(EDGES, clipped, side="right") - 1
    return np.minimum(index, len(EDGES) - 2)


def _jsd_hist(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen–Shannon distance, base 2, of two histograms (as `scipy.spatial.distance.jensenshannon`)."""
    p, q = p / p.sum(), q / q.sum()
    m = (p + q) / 2.0
    divergence = sum(float(np.sum(a[a > 0] * np.log2(a[a > 0] / m[a > 0]))) for a in (p, q)) / 2.0
    return math.sqrt(max(divergence, 0.0))


def _jsd(x: Sequence[float], y: Sequence[float], counts: np.ndarray | None = None) -> float:
    """The audit's JS distance (`lengthwise.js_distance`: 100 bins over [-1, 1]) of two paired samples."""
    w = np.ones(len(x)) if counts is None else counts
    bins = len(EDGES) - 1
    return _jsd_hist(np.bincount(_bins(x), w, bins), np.bincount(_bins(y), w, bins))


def _same(a: Sequence[Any], b: Sequence[Any], what: str) -> None:
    if len(a) != len(b) or list(a) != list(b):
        raise ValueError(f"{what}: the arm's and SimCSE's records do not hold the same items; evaluate them again")


def _spearman_stat(task: np.ndarray, gold: np.ndarray, arm: np.ndarray, base: np.ndarray) -> Counted:
    """Mean over tasks of Spearman(arm) − Spearman(SimCSE), each task on its own items (one task: its difference)."""
    blocks = [np.flatnonzero(task == value) for value in np.unique(task)]
    prepared = [
        (index, _groups(gold[index]), _groups(arm[index]), _groups(base[index])) for index in blocks
    ]  # sorted once; a resample only re-weights

    def statistic(counts: np.ndarray) -> float:
        diffs = []
        for index, g, f, b in prepared:
            w = counts[index]
            rg = _weighted_ranks(g, w)
            diffs.append(
                _weighted_pearson(_weighted_ranks(f, w), rg, w) - _weighted_pearson(_weighted_ranks(b, w), rg, w)
            )
        return 100.0 * float(np.mean(diffs))

    return statistic


def _sts(tasks: Sequence[str]) -> Callable[[dict, dict], tuple[int, Counted]]:
    """One STS task's Spearman difference, or the mean over several (their pairs' union, each scored on its own)."""

    def extract(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
        for name in tasks:
            _same(f["sts"][name]["gold"], b["sts"][name]["gold"], name)
        task = np.concatenate([np.full(len(f["sts"][name]["gold"]), i) for i, name in enumerate(tasks)])
        gold, arm, base = (
            np.concatenate([np.asarray(r["sts"][name][key], dtype=float) for name in tasks])
            for r, key in ((f, "gold"), (f, "cosines"), (b, "cosines"))
        )
        return len(task), _spearman_stat(task, gold, arm, base)

    return extract


def _long_sts(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
    ff, bb = f["long_sts"], b["long_sts"]
    _same([ff["pairs_sha256"]], [bb["pairs_sha256"]], "long STS")
    arrays = (np.asarray(x, dtype=float) for x in (ff["gold"], ff["cosines"], bb["cosines"]))
    gold, arm, base = arrays
    return len(gold), _spearman_stat(np.zeros(len(gold)), gold, arm, base)


def _mean_stat(arm: np.ndarray, base: np.ndarray) -> Counted:
    diff = np.asarray(arm, dtype=float) - np.asarray(base, dtype=float)
    return lambda counts: float(counts @ diff / counts.sum())


def _attack(f: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ff, bb = f["stsb_attack"], b["stsb_attack"]
    _same([len(ff["before"])], [len(bb["before"])], "STS-B attack")
    return ff, bb


def _attack_shift(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
    ff, bb = _attack(f, b)
    shift = [np.asarray(r["after"]) - np.asarray(r["before"]) for r in (ff, bb)]
    return len(shift[0]), _mean_stat(*shift)


def _jsd_stat(arm: Sequence[tuple[Sequence[float], Sequence[float]]], base: Sequence[tuple]) -> Counted:
    """Mean JSD over the arm's (x, y) sample pairs minus the same over SimCSE's."""
    bins = len(EDGES) - 1
    binned = [[(_bins(x), _bins(y)) for x, y in side] for side in (arm, base)]

    def statistic(counts: np.ndarray) -> float:
        means = [
            np.mean([_jsd_hist(np.bincount(x, counts, bins), np.bincount(y, counts, bins)) for x, y in side])
            for side in binned
        ]
        return float(means[0] - means[1])

    return statistic


def _attack_jsd(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
    ff, bb = _attack(f, b)
    return len(ff["before"]), _jsd_stat([(ff["before"], ff["after"])], [(bb["before"], bb["after"])])


def _curve_ks(f: dict[str, Any], b: dict[str, Any]) -> list[int]:
    """The k of both curves below both windows (at k = N the cut is the full window, its JSD 0 by construction)."""
    window = min(f["window"], b["window"])
    return [k for k in f["ks"] if k in b["ks"] and k < window]


def first_k_jsd(curve: dict[str, Any]) -> float:
    """One model's first-k summary: the mean over k < N of JSD(first-k cosines, full-window cosines)."""
    ks = _curve_ks(curve, curve)
    full = curve["cosines"]["full"]
    return float(np.mean([_jsd(full, curve["cosines"][str(k)]) for k in ks])) if ks else float("nan")


def _first_k(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
    ff, bb = f["first_k"], b["first_k"]
    _same([ff["pairs_sha256"]], [bb["pairs_sha256"]], "first-k pairs")
    ks = _curve_ks(ff, bb)
    if not ks:
        raise ValueError("first-k: no k below the window in both records")
    side = [[(r["cosines"]["full"], r["cosines"][str(k)]) for k in ks] for r in (ff, bb)]
    return len(ff["cosines"]["full"]), _jsd_stat(*side)


def _first_k_mean(k: int) -> Callable[[dict, dict], tuple[int, Counted]]:
    def extract(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
        _same([f["first_k"]["pairs_sha256"]], [b["first_k"]["pairs_sha256"]], "first-k pairs")
        return len(f["first_k"]["cosines"]["full"]), _mean_stat(
            f["first_k"]["cosines"][str(k)], b["first_k"]["cosines"][str(k)]
        )

    return extract


def _scifact(f: dict[str, Any], b: dict[str, Any]) -> tuple[int, Counted]:
    queries = sorted(b["scifact"]["per_query"])
    _same(sorted(f["scifact"]["per_query"]), queries, "SciFact queries")
    values = [np.asarray([r["scifact"]["per_query"][q] for q in queries]) * 100 for r in (f, b)]
    return len(queries), _mean_stat(*values)


# metric → (the eval part it needs, extractor: one seed's item count and its difference as a function of the counts)
METRICS: dict[str, tuple[str, Callable[[dict, dict], tuple[int, Counted]]]] = {
    "stsb": ("sts", _sts(("STS-B",))),
    "sts12_16_avg": ("sts", _sts(QUALITY_STS)),
    "sick_r": ("sts", _sts(("SICK-R",))),
    "sts7_avg": ("sts", _sts(SEVEN_STS)),
    "long_sts": ("long_sts", _long_sts),
    "attack_shift": ("stsb_attack", _attack_shift),
    "attack_jsd": ("stsb_attack", _attack_jsd),
    "first_k_jsd": ("first_k", _first_k),
    "scifact": ("scifact", _scifact),
}


def combined(per_seed: Sequence[tuple[int, Counted]], resamples: int = RESAMPLES) -> dict[str, Any]:
    """The mean over seeds of each seed's difference, with a paired bootstrap interval that resamples the items
    jointly: one draw of item ids per resample serves every seed (each seed's items in the same order)."""
    from lengthwise.core.stats import paired_bootstrap

    sizes = {n for n, _ in per_seed}
    if len(sizes) != 1:
        raise ValueError(f"the seeds' items differ in number ({sorted(sizes)}); they cannot be resampled jointly")
    n = sizes.pop()

    def statistic(ids: np.ndarray) -> float:
        counts = np.bincount(ids.astype(np.int64), minlength=n).astype(float)
        return float(np.mean([stat(counts) for _, stat in per_seed]))

    point, low, high = paired_bootstrap((np.arange(n),), statistic, resamples=resamples, vectorized=False)
    seeds = [float(stat(np.ones(n))) for _, stat in per_seed]
    return {"diff": point, "low": low, "high": high, "per_seed": seeds}


def verdict(interval: dict[str, Any] | None, relation: str, margin: float = 0.0, seeds: int = len(SEEDS)) -> str:
    """The verdict rule of the module docstring, applied to one interval (``diff``, ``low``, ``high``)."""
    if interval is None or not seeds:
        return "not measured"
    low, high = interval["low"], interval["high"]
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive at this scale (no finite interval)"
    if relation in ("+", "-"):
        sign = 1.0 if relation == "+" else -1.0
        lo, hi = sorted((sign * low, sign * high))
        text = "reproduced in direction" if lo > 0 else "not reproduced (opposite direction)" if hi < 0 else None
    elif relation == ">=":
        text = (
            f"reproduced (not below SimCSE by {margin:g} or more)"
            if low > -margin
            else f"not reproduced (below SimCSE by more than {margin:g})"
            if high < -margin
            else None
        )
    elif relation == "~":
        inside, outside = -margin < low and high < margin, high < -margin or low > margin
        text = (
            f"reproduced (within ±{margin:g})"
            if inside
            else f"not reproduced (outside ±{margin:g})"
            if outside
            else None
        )
    else:
        raise ValueError(f"unknown claimed relation {relation!r}; use +, -, >= or ~")
    text = text or "inconclusive at this scale"
    return text if seeds >= len(SEEDS) else f"{text} ({seeds} of {len(SEEDS)} seeds)"


# --------------------------------------------------------------------------------------------------------- records


def _read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def load(out: Path, parts: Sequence[str] = PARTS) -> tuple[dict[str, dict[int, dict]], dict, dict | None, list[str]]:
    """(eval records by arm and seed, train records likewise, the start's record, what is missing)."""
    records: dict[str, dict[int, dict]] = {}
    trains: dict[str, dict[int, dict]] = {}
    missing: list[str] = []
    start = _read(out / "start" / "record.json")
    if start is None:
        missing.append("start: not evaluated")
    elif lacking := [p for p in parts if p not in start]:
        missing.append(f"start: eval lacks {', '.join(lacking)}")
    for arm in ARMS:
        for seed in SEEDS:
            folder = out / arm / f"seed{seed}"
            train, record = _read(folder / "train_record.json"), _read(folder / "record.json")
            if train is not None:
                trains.setdefault(arm, {})[seed] = train
            if record is not None:
                records.setdefault(arm, {})[seed] = record
            if train is None:
                missing.append(f"{arm} seed {seed}: not trained" + ("" if record is None else " (but evaluated?)"))
            elif record is None:
                missing.append(f"{arm} seed {seed}: not evaluated")
            elif lacking := [p for p in parts if p not in record]:
                missing.append(f"{arm} seed {seed}: eval lacks {', '.join(lacking)}")
    return records, trains, start, missing


def headline(record: dict[str, Any], train: dict[str, Any] | None = None) -> dict[str, Any]:
    """The point values of one run (no per-item arrays); a part not recorded is absent."""
    out: dict[str, Any] = {}
    sts = record.get("sts")
    if sts:
        out["stsb"] = sts["STS-B"]["spearman"]
        out["sts12_16_avg"] = float(np.mean([sts[name]["spearman"] for name in QUALITY_STS]))
        if "SICK-R" in sts:
            out["sick_r"] = sts["SICK-R"]["spearman"]
            out["sts7_avg"] = float(np.mean([sts[name]["spearman"] for name in SEVEN_STS]))
    if "long_sts" in record:
        out["long_sts"] = record["long_sts"]["spearman"]
    if "stsb_attack" in record:
        attack = record["stsb_attack"]
        null = attack.get("js_null") or {}
        out.update({"attack_shift": attack["mean_shift"], "attack_jsd": attack["js_distance"],
                    "attack_null_q95": null.get("q95"), "attack_null_p": null.get("p_value")})  # fmt: skip
    if "first_k" in record:
        curve = record["first_k"]
        out["first_k_jsd"] = first_k_jsd(curve)
        out["first_k_mean"] = {str(row["k"]): row["mean"] for row in curve["summary"]}
    if "scifact" in record:
        out["scifact"] = 100 * record["scifact"]["ndcg@10"]
    if train is not None:
        out["s_per_step"] = seconds_per_step(train)
        out["train_wall_s"] = train["wall_s"]
    return out


def seconds_per_step(train: dict[str, Any]) -> float:
    """Training seconds per step *run in the timed session*: a resumed run's trainer times only the steps after
    its checkpoint (`steps_run`; for a record written before that field, read from the run's ``train.json``)."""
    steps = train.get("steps_run")
    if steps is None:
        steps = train["steps"]
        log = Path(train.get("model_dir", "")).parent / "train.json"
        resumed = json.loads(log.read_text(encoding="utf-8")).get("resumed_from") if log.is_file() else None
        if resumed and (found := re.search(r"checkpoint-(\d+)$", str(resumed))):
            steps -= int(found.group(1))
    return train["train_runtime_s"] / max(steps, 1)


def differences(arm: dict[int, dict], base: dict[int, dict], arm_train: dict[int, dict], base_train: dict[int, dict],
                resamples: int) -> dict[str, Any]:  # fmt: skip
    """Every metric's seed-combined interval (arm − SimCSE) over the seeds where both have the part it needs."""
    out: dict[str, Any] = {}
    for metric, (part, extract) in METRICS.items():
        seeds = [s for s in SEEDS if part in arm.get(s, {}) and part in base.get(s, {})]
        if seeds:
            out[metric] = {**combined([extract(arm[s], base[s]) for s in seeds], resamples), "seeds": seeds}
    first = [s for s in SEEDS if "first_k" in arm.get(s, {}) and "first_k" in base.get(s, {})]
    if first:
        ks = _curve_ks(arm[first[0]]["first_k"], base[first[0]]["first_k"])
        out["first_k_mean"] = {
            str(k): {**combined([_first_k_mean(k)(arm[s], base[s]) for s in first], resamples), "seeds": first}
            for k in ks
        }
    trained = [s for s in SEEDS if s in arm_train and s in base_train]
    timed = [s for s in trained if _one_session(arm_train[s], base_train[s])]
    if timed:
        ratios = [seconds_per_step(arm_train[s]) / seconds_per_step(base_train[s]) - 1.0 for s in timed]
        out["s_per_step_ratio"] = {"diff": float(np.mean(ratios)), "low": min(ratios), "high": max(ratios),
                                   "per_seed": ratios, "seeds": timed, "interval": "range over seeds"}  # fmt: skip
    if skipped := [s for s in trained if s not in timed]:
        said = "seeds " + ", ".join(str(s) for s in skipped)
        if timed:
            out["s_per_step_ratio"]["not_comparable"] = said
        else:
            out["s_per_step_ratio_not_comparable"] = said
    return out


def _one_session(arm: dict[str, Any], base: dict[str, Any]) -> bool:
    """Whether two trainings were timed in one queue session (`vanilla_arms.py run-all` records it): a ratio of
    seconds per step across sessions measures the hosts as much as the arms (this machine ran one benchmark 2.8x
    slower one day than another), so only runs of one session are compared; a record without one is not."""
    session = arm.get("timing_session")
    return session is not None and session == base.get("timing_session")


def scale(out: Path, start: dict[str, Any] | None, trains: dict[str, dict[int, dict]]) -> dict[str, Any]:
    """The study's scale from its records: the start model (config, pretraining summary) and the arms' schedule."""
    info: dict[str, Any] = {}
    first = next((t for by_seed in trains.values() for t in by_seed.values()), None)
    model = Path(start["model"]) if start else Path(first["start"]) if first else None
    if model is not None and (model / "config.json").exists():
        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
        info["model"] = {k: config.get(k) for k in ("model_type", "num_hidden_layers", "hidden_size",
                                                     "num_attention_heads", "intermediate_size")}  # fmt: skip
        info["model"]["path"] = str(model)
    summary = _read(model.parent / "summary.json") if model is not None else None
    if summary and summary.get("study") == "vanilla":
        resolved = summary["settings"].get("resolved", {})
        steps = summary.get("global_step") or 0
        info["pretraining"] = {
            "parameters": summary.get("parameters"),
            "corpus_tokens": summary["data"].get("tokens"),
            "steps": steps,
            "batch_size": resolved.get("batch_size"),
            "seq_len": resolved.get("seq_len"),
            "tokens_seen": steps * resolved.get("batch_size", 0) * resolved.get("seq_len", 0),
            "status": summary.get("status"),
        }
    if first is not None:
        settings = first["settings"]
        info["arms"] = {k: settings.get(k) for k in ("max_steps", "batch_size", "max_length", "lr", "pooling")}
    data = _read(out / "data.json")
    if data:
        info["data"] = {k: data.get(k) for k in ("n_texts", "source", "data_seed", "pairs_note")}
    info["seeds"] = sorted({s for by_seed in trains.values() for s in by_seed})
    return info


def scale_line(info: dict[str, Any]) -> str:
    parts = []
    if "model" in info:
        m = info["model"]
        parts.append(f"start: {m['model_type']} {m['num_hidden_layers']} layers × {m['hidden_size']} wide")
    if "pretraining" in info:
        p = info["pretraining"]
        params = (p.get("parameters") or {}).get("total")
        parts.append(
            (f"{params / 1e6:.1f} M parameters, " if params else "")
            + f"MLM-pretrained here {p['steps']} steps × {p['batch_size']} × {p['seq_len']} tokens "
            f"({p['tokens_seen'] / 1e6:.1f} M tokens seen; corpus {(p['corpus_tokens'] or 0) / 1e6:.1f} M tokens; "
            f"status {p['status']})"
        )
    if "arms" in info:
        a = info["arms"]
        texts = info.get("data", {}).get("n_texts")
        parts.append(
            f"each arm {a['max_steps']} steps × batch {a['batch_size']} at N = {a['max_length']}, lr {a['lr']:g}, "
            f"{a['pooling']} pooling" + (f", on the same {texts:,} texts" if texts else "")
        )
    parts.append(f"seeds {', '.join(map(str, info.get('seeds', []))) or 'none yet'}")
    return "Scale: " + "; ".join(parts) + "."


# -------------------------------------------------------------------------------------------------------- render


def _fmt(value: float | None, digits: int = 2, signed: bool = False) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _ci(entry: dict[str, Any] | None, digits: int = 2) -> str:
    if entry is None:
        return "—"
    diff, low, high = (_fmt(entry[key], digits, True) for key in ("diff", "low", "high"))
    return f"{diff} [{low}, {high}]"


def _per_seed(entry: dict[str, Any], digits: int) -> str:
    return "; ".join(f"s{s}: {_fmt(v, digits, True)}" for s, v in zip(entry["seeds"], entry["per_seed"], strict=True))


def render(payload: dict[str, Any]) -> str:
    """The markdown: method, scale, Δ table, per-seed table, claims table, missing runs."""
    arms = payload["arms"]
    measured = [m for m in LABELS if any(m in row["diff"] for row in arms.values())]
    lines = [
        "Δ = arm − SimCSE of the same seed, seeds combined: " + payload["method"]["seeds"],
        "",
        scale_line(payload["scale"]),
        "",
        "| arm | seeds | " + " | ".join(LABELS[m] for m in measured) + " |",
        "|---|---|" + "---|" * len(measured),
    ]
    for arm, row in arms.items():
        if arm == BASE:
            continue
        cells = [_ci(row["diff"].get(m), DIGITS.get(m, 2)) for m in measured]
        lines.append(f"| {arm} | {', '.join(map(str, row['seeds']))} | " + " | ".join(cells) + " |")
    keys = ("stsb", "sts12_16_avg", "sick_r", "long_sts", "attack_shift", "first_k_jsd", "scifact", "s_per_step")
    lines += [
        "",
        "Per run (point values; the attack's JSD with its permutation null q95 and p):",
        "",
        "| arm | seed | STS-B | STS12–16 | SICK-R | long STS | attack shift | attack JSD (q95; p) | first-k JSD "
        "| SciFact | s/step |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    runs = [("start (vanilla)", "—", payload["start"])] if payload["start"] else []
    runs += [(arm, str(s), h) for arm, row in arms.items() for s, h in row["per_seed"].items()]
    for name, seed, h in runs:
        digits = {"attack_shift": 4, "first_k_jsd": 3, "s_per_step": 2}
        cells = [_fmt(h.get(k), digits.get(k, 2), k == "attack_shift") for k in keys]
        jsd = f"{_fmt(h.get('attack_jsd'), 3)} ({_fmt(h.get('attack_null_q95'), 3)}; {_fmt(h.get('attack_null_p'), 3)})"
        cells.insert(5, jsd)
        lines.append(f"| {name} | {seed} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "The papers' claims (verdict by the rule in experiments/vanilla_arms_report.py, fixed before the results):",
        "",
        "| paper | claim | paper's figure (source) | our metric | ours: Δ vs SimCSE [95 % CI] (per seed) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for claim in payload["claims"]:
        ours = claim["ours"]
        digits = DIGITS.get(claim["metric"], 2)
        text = "not measured" if ours is None else f"{_ci(ours, digits)} ({_per_seed(ours, digits)})"
        if ours is not None and claim.get("null"):
            text += f"; within null in {claim['null']}"
        relation = claim["relation"] + (f" {claim['margin']:g}" if claim.get("margin") else "")
        lines.append(
            f"| {claim['paper']} | {claim['claim']} | {claim['paper_figure']} ({claim['source']}) "
            f"| {claim['our_metric']} [{claim['arm']}, {relation}] | {text} | {claim['verdict']} |"
        )
    if payload["missing"]:
        lines += ["", "Missing runs: " + "; ".join(payload["missing"]) + "."]
    return "\n".join(lines)


def _null_count(records: dict[int, dict], seeds: Sequence[int]) -> str | None:
    """'k of n seeds': the runs whose attack JSD is at or under its permutation null's q95."""
    nulls = [records[s]["stsb_attack"].get("js_null") for s in seeds]
    if not seeds or any(n is None for n in nulls):
        return None
    within = sum(records[s]["stsb_attack"]["js_distance"] <= n["q95"] for s, n in zip(seeds, nulls, strict=True))
    return f"{within} of {len(seeds)} seeds"


def build(out: Path, resamples: int = RESAMPLES, parts: Sequence[str] = PARTS) -> dict[str, Any]:
    """Everything the report writes, as one payload (raises SystemExit when no SimCSE run is evaluated yet)."""
    records, trains, start, missing = load(out, parts)
    if not records.get(BASE):
        raise SystemExit(
            "report: no SimCSE run is evaluated yet, nothing to compare with. Missing:\n  " + "\n  ".join(missing)
        )
    base, base_train = records[BASE], trains.get(BASE, {})
    arms: dict[str, Any] = {}
    for arm in ARMS:
        if arm not in records:
            continue
        by_seed = records[arm]
        arms[arm] = {
            "seeds": sorted(by_seed),
            "per_seed": {s: headline(by_seed[s], trains.get(arm, {}).get(s)) for s in sorted(by_seed)},
            "diff": {} if arm == BASE else differences(by_seed, base, trains.get(arm, {}), base_train, resamples),
        }
    claims = []
    for claim in CLAIMS:
        row = arms.get(claim["arm"])
        ours = None if row is None else row["diff"].get(claim["metric"])
        seeds = len(ours["seeds"]) if ours else 0
        entry = {**claim, "ours": ours, "verdict": verdict(ours, claim["relation"], claim.get("margin", 0.0), seeds)}
        if ours is None and row is not None and (why := row["diff"].get(f"{claim['metric']}_not_comparable")):
            entry["verdict"] = f"not measured ({why} timed in different sessions than SimCSE's)"
        if ours is not None and claim["metric"] == "attack_jsd":
            entry["null"] = _null_count(records[claim["arm"]], ours["seeds"])
        claims.append(entry)
    method: dict[str, Any] = {"bootstrap": "percentile", "resamples": resamples, "confidence": 0.95, "paired": True}
    seeds_note = (
        "items (pairs, queries) resampled jointly across seeds and both models, statistic = mean over seeds of "
        "the per-seed difference; paired bootstrap, percentile, "
        f"{resamples} resamples, seed 0, 95 %. The interval covers item sampling given these runs, not seed-to-seed "
        "variation (see the per-seed values). Training cost: range over seeds, not a bootstrap."
    )
    method["seeds"] = seeds_note
    return {
        "study": "issue 37 part 2: objectives from one vanilla encoder (experiments/vanilla_arms.py)",
        "method": method,
        "verdict_rule": __doc__.split("**Verdict rule**")[1].strip(),
        "scale": scale(out, start, trains),
        "missing": missing,
        "start": headline(start) if start else None,
        "arms": arms,
        "claims": claims,
    }


def report(out: Path, *, results: Path | None = None, resamples: int = RESAMPLES, check: bool = False,
           parts: Sequence[str] = PARTS) -> int:  # fmt: skip
    """``--check``: list the missing arm/seed records (exit 1 if any). Else write RESULTS/vanilla_arms.json and
    RESULTS/vanilla_arms.md (default docs/results) from the records there are, listing what is missing."""
    from lengthwise.core.results import write_json_atomic

    if check:
        _, _, _, missing = load(out, parts)
        print("\n".join(missing) if missing else f"complete: start and {len(ARMS)} arms × {len(SEEDS)} seeds")
        return 1 if missing else 0
    try:
        payload = build(out, resamples, parts)
    except SystemExit as stop:
        print(stop, flush=True)
        return 1
    folder = results or REPO / "docs" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / "vanilla_arms.json", payload)
    markdown = render(payload)
    (folder / "vanilla_arms.md").write_text(markdown + "\n", encoding="utf-8")
    print(markdown)
    return 0
