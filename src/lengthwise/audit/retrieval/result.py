"""The ``retrieval_bias`` section of ``audit.json`` as typed dicts, and its plain-language verdicts.

Kept free of torch and matplotlib so the report, the comparison page and the command line can read a stored
audit cheaply. The verdicts are computed from the stored numbers, so a re-rendered report says the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import numpy as np

__all__ = [
    "Controlled",
    "Correlation",
    "Natural",
    "PairedShift",
    "PositionUnit",
    "RetrievalBias",
    "SearchBias",
    "Setting",
    "Verdict",
    "format_p",
    "signed_rank_balance",
    "verdicts",
]


class Correlation(TypedDict):
    """A rank correlation, its two-sided p-value and the number of items."""

    rho: float
    p_value: float
    n: int


class PairedShift(TypedDict):
    """One paired comparison (after − before): means, the mean difference with its 95 % bootstrap interval, the
    median difference, the Wilcoxon signed-rank p-value and how many pairs changed at all."""

    n: int
    mean_before: float
    mean_after: float
    mean_delta: float
    ci95: list[float]
    median_delta: float
    p_value: float
    n_changed: int


class Setting(TypedDict):
    """One controlled perturbation over the sampled (query, relevant document) pairs, paired with its control.

    `rank` and `score` compare after with before (Δrank > 0: the document moved down); `n_cut` pairs had their
    document cut to its first tokens so that the perturbed sequence fits the window; `tokens_before_mean` and
    `tokens_mean` are the mean content tokens of the control and of the perturbed sequence; `delta_rank` per pair.
    """

    label: str
    n: int
    n_cut: int
    tokens_before_mean: float
    tokens_mean: float
    rank: PairedShift
    score: PairedShift
    recall_before: float
    recall_after: float
    delta_rank: list[int]


class PositionUnit(TypedDict):
    """A unit (the document cut to half the probe, or its best-matching sentence) inside filler, by depth.

    Each depth is paired with the unit alone; `friedman` tests whether the depth changes the rank at all."""

    unit_tokens_mean: float
    total_tokens: int
    alone_recall: float
    alone_mean_rank: float
    depths: dict[str, Setting]
    friedman: dict[str, float]


class Controlled(TypedDict):
    n_pairs: int
    pairs_available: int
    dilution: dict[str, Setting]
    repetition: dict[str, dict[str, Setting]]  # "relevant" / "non_relevant" → label → setting
    position: dict[str, PositionUnit]  # "document" / "sentence"


class Natural(TypedDict):
    rank_vs_length: dict[str, Any]  # correlation (Correlation), by_bin rows, bins spec, per-pair lists
    top_k_lengths: dict[str, Any]  # length summaries, percentiles with CIs, KS tests, histograms
    score_length: dict[str, Any]  # partial Spearman of score with length among non-relevant documents


class Verdict(TypedDict):
    bias: str
    text: str
    significant: bool


class SearchBias(TypedDict):
    """The audit through another search than the dense one (``by_search`` → ``lexical`` / ``hybrid``): the same
    pairs and perturbed texts, ranked by BM25 or by the fused scores (`lengthwise.audit.retrieval.sides`)."""

    search: str
    settings: dict[str, Any]  # the lexical engine's settings; for hybrid also the fusion and its lexical weight
    natural: Natural
    controlled: Controlled
    verdicts: list[Verdict]


class _DenseBias(TypedDict):
    settings: dict[str, Any]
    data: dict[str, Any]
    window: int
    top_k: int
    natural: Natural
    controlled: Controlled
    verdicts: list[Verdict]
    cost: dict[str, Any]


class RetrievalBias(_DenseBias, total=False):
    """``audit.json`` → ``retrieval_bias``: the dense search (the encoder), and ``by_search`` when other searches
    were asked for (a field added in 0.3: optional, so older audits still load)."""

    by_search: dict[str, SearchBias]


def format_p(p: float) -> str:
    """``p < 0.001`` or ``p = 0.012``."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _ordinal(value: float) -> str:
    """``51st``, ``12th``: a percentile in words."""
    number = round(value)
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


def _ranks(value: float) -> str:
    return f"{abs(value):.1f} rank" + ("" if abs(value) == 1 else "s")


def _move(shift: PairedShift, lose: str = "lose", gain: str = "gain") -> str:
    """``lose 12.3 ranks on average (median 3, 95 % CI 8.1–16.0)``."""
    mean, low, high = shift["mean_delta"], *shift["ci95"]
    verb = lose if mean > 0 else gain
    return (
        f"{verb} {_ranks(mean)} on average (median {abs(shift['median_delta']):g}, 95 % CI {low:+.1f} to {high:+.1f})"
    )


def _pick(settings: Mapping[str, Setting], preferred: str) -> Setting | None:
    if not settings:
        return None
    return settings.get(preferred) or list(settings.values())[-1]


def _natural_verdicts(natural: Mapping[str, Any], alpha: float, top_k: int) -> list[Verdict]:
    out: list[Verdict] = []
    corr: Correlation = natural["rank_vs_length"]["correlation"]
    significant = corr["p_value"] < alpha
    evidence = f"{format_p(corr['p_value'])}, {corr['n']} pairs"
    if significant:
        side = "lower" if corr["rho"] > 0 else "higher"
        text = f"Longer relevant documents rank {side}: Spearman ρ(length, rank) = {corr['rho']:+.2f} ({evidence})."
    else:
        text = f"No significant link between a relevant document's length and its rank (ρ = {corr['rho']:+.2f}, "
        text += f"{evidence})."
    out.append(Verdict(bias="rank_vs_length", text=text, significant=significant))
    lengths = natural["top_k_lengths"]
    mean, (low, high) = lengths["retrieved_percentile"]["mean"], lengths["retrieved_percentile"]["ci95"]
    relevant = lengths["relevant_percentile"]["mean"]
    significant = not low <= 0.5 <= high
    lean = (" lean long" if mean > 0.5 else " lean short") if significant else " follow the corpus's lengths"
    out.append(
        Verdict(
            bias="top_k_lengths",
            text=f"The top {top_k}{lean}: retrieved documents sit at the {_ordinal(100 * mean)} length percentile of "
            f"the corpus on average (95 % CI {100 * low:.0f}–{100 * high:.0f}; relevant documents: "
            f"{_ordinal(100 * relevant)}; KS vs corpus {format_p(lengths['ks_vs_corpus']['p_value'])}).",
            significant=significant,
        )
    )
    partial = natural["score_length"]
    significant = partial["wilcoxon_p"] < alpha
    how = "score does not follow length"
    if significant:
        how = "longer ones score higher" if partial["per_query_mean"] > 0 else "longer ones score lower"
    out.append(
        Verdict(
            bias="score_length",
            text=f"Among non-relevant documents, {how} for the same query (partial Spearman ρ = "
            f"{partial['partial_rho']:+.3f}; per-query mean {partial['per_query_mean']:+.3f}, Wilcoxon "
            f"{format_p(partial['wilcoxon_p'])} over {partial['n_queries']} queries).",
            significant=significant,
        )
    )
    return out


def signed_rank_balance(delta: Sequence[float]) -> float:
    """The matched-pairs rank-biserial correlation of paired differences, in [-1, 1]: (R+ − R−) / (R+ + R−) over
    the Wilcoxon signed ranks of the non-zero differences (ties share their average rank). Its sign is the
    direction the Wilcoxon test sees, which the mean can contradict when a few pairs move far; 0 if none moved."""
    values = np.asarray(delta, dtype=np.float64)
    values = values[values != 0]
    if not len(values):
        return 0.0
    magnitude = np.abs(values)
    order = np.argsort(magnitude, kind="mergesort")
    _, inverse, counts = np.unique(magnitude[order], return_inverse=True, return_counts=True)
    average = np.cumsum(counts) - (counts - 1) / 2.0  # the average rank of each tie group, 1-based
    ranks = np.empty(len(values))
    ranks[order] = average[inverse]
    return float((ranks[values > 0].sum() - ranks[values < 0].sum()) / ranks.sum())


def _shift_verdict(bias: str, subject: str, what: str, setting: Setting, alpha: float, top_k: int) -> Verdict:
    """The sentence for one paired setting. The mean is stated as the size only when it agrees with the
    direction the Wilcoxon test sees and its interval excludes 0; otherwise the sentence says which way most
    pairs moved and that the mean change is not clear."""
    rank = setting["rank"]
    significant = rank["p_value"] < alpha
    tail = (
        f"({format_p(rank['p_value'])}, {setting['n']} pairs; recall@{top_k} "
        f"{100 * setting['recall_before']:.0f} % → {100 * setting['recall_after']:.0f} %)"
    )
    balance = signed_rank_balance(setting["delta_rank"])
    low, high = rank["ci95"]
    mean_is_clear = (low > 0 or high < 0) and np.sign(rank["mean_delta"]) == np.sign(balance)
    if significant and mean_is_clear:
        text = f"{subject} {_move(rank)} {what} {tail}."
    elif significant:
        way = "down" if balance > 0 else "up"
        text = (
            f"{subject} tend to move {way} {what} (rank-biserial r = {balance:+.2f}), but the mean change is not "
            f"clear: {rank['mean_delta']:+.1f} ranks, 95 % CI {low:+.1f} to {high:+.1f} {tail}."
        )
    else:
        text = f"{subject} keep their rank {what} (mean Δ {rank['mean_delta']:+.1f} ranks; {tail[1:]}."
    return Verdict(bias=bias, text=text, significant=significant)


def _position_verdict(unit: str, result: PositionUnit, alpha: float, top_k: int) -> Verdict:
    depths = result["depths"]
    labels = "/".join(label.rstrip("%") for label in depths)
    recalls = "/".join(f"{100 * setting['recall_after']:.0f}" for setting in depths.values())
    p = result["friedman"]["p_value"]
    significant = p < alpha
    what = "the best-matching sentence" if unit == "sentence" else "the relevant document"
    verdict = "depth matters" if significant else "depth does not matter significantly"
    return Verdict(
        bias=f"position_{unit}",
        text=f"With {what} inside unrelated text ({result['total_tokens']} tokens in all), recall@{top_k} at "
        f"depth {labels} %: {recalls} % ({unit} alone: {100 * result['alone_recall']:.0f} %); {verdict} "
        f"(Friedman {format_p(p)}).",
        significant=significant,
    )


def verdicts(section: Mapping[str, Any], alpha: float = 0.05) -> list[Verdict]:
    """One sentence per bias from a ``retrieval_bias`` section (natural, dilution, repetition, position)."""
    top_k = int(section.get("top_k", 10))
    out = _natural_verdicts(section["natural"], alpha, top_k)
    controlled = section["controlled"]
    dilution = _pick(controlled["dilution"], "2x")
    if dilution is not None:
        what = f"when diluted to {dilution['label'].removesuffix('x')}× their length with unrelated text"
        out.append(_shift_verdict("dilution", "Relevant documents", what, dilution, alpha, top_k))
    for target, subject in (("relevant", "Relevant documents"), ("non_relevant", "Non-relevant top-100 documents")):
        setting = _pick(controlled["repetition"].get(target) or {}, "m=2")
        if setting is not None:
            what = f"when repeated {setting['label'].removeprefix('m=')} times"
            out.append(_shift_verdict(f"repetition_{target}", subject, what, setting, alpha, top_k))
    for unit, result in controlled["position"].items():
        out.append(_position_verdict(unit, result, alpha, top_k))
    return out
