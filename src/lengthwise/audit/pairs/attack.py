"""The elongation audit (METHODS §1): how pair similarities move when texts are copied or truncated.

`run_audit` builds every token sequence first (original, elongated `f(S, m)`, first-k, word-shuffled),
embeds each distinct sequence once, longest-first, and turns the cosines into `shift` statistics.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, cast

import numpy as np
from sentence_transformers import SentenceTransformer

from lengthwise.audit.config import AuditConfig, HistogramSpec
from lengthwise.audit.pairs.shift import (
    js_distance,
    js_distance_null,
    similarity_histogram,
    similarity_shift,
)
from lengthwise.audit.schema import (
    AttackSection,
    AuditPayload,
    FirstKRow,
    ShiftSection,
    Similarities,
    TokensSection,
    WordShuffleSection,
)
from lengthwise.core.data import PairSet
from lengthwise.core.embed import TokenView, embed_ids
from lengthwise.core.errors import SettingError
from lengthwise.core.models import model_fingerprint
from lengthwise.core.results import environment
from lengthwise.core.scoring import paired_cosine
from lengthwise.core.tokens import content_ids, elongate, elongation_factor, first_k, kept_text, shuffle_words

__all__ = ["AuditResult", "NothingElongatedError", "run_audit"]

WARN_SHARE = 0.10  # warn when at least this share of texts cannot hold two copies and stays unchanged


class NothingElongatedError(SettingError):
    """No text can hold two copies within the window, so the attack would compare every pair with itself; `field`
    is the setting to change (``max_length`` or ``elongation``)."""


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit measured, as plain data; `to_dict()` is what `audit.json` holds."""

    attack: AttackSection
    tokens: TokensSection
    first_k_curve: list[FirstKRow]
    word_shuffle: WordShuffleSection | None
    attack_by_kind: dict[str, ShiftSection]
    similarities: Similarities  # before/after cosines per pair; `kind` per pair when the data has kinds
    settings: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # what makes a figure weaker than it looks

    def to_dict(self) -> AuditPayload:
        return cast(AuditPayload, asdict(self))


class _SequenceBank:
    """Collects token sequences, deduplicated, so each distinct input is embedded exactly once."""

    def __init__(self) -> None:
        self.index: dict[tuple[int, ...], int] = {}

    def add(self, sequences: Sequence[Sequence[int]]) -> np.ndarray:
        return np.array([self.index.setdefault(tuple(ids), len(self.index)) for ids in sequences], dtype=np.int64)

    def sequences(self) -> list[tuple[int, ...]]:
        return list(self.index)


def _histogram_dict(values: np.ndarray, spec: HistogramSpec) -> list[int]:
    return [int(c) for c in similarity_histogram(values, spec)]


def _shift(before: np.ndarray, after: np.ndarray, spec: HistogramSpec) -> ShiftSection:
    return similarity_shift(before, after, spec)


def _check_elongation(lengths: np.ndarray, factors: np.ndarray, view: TokenView, config: AuditConfig) -> list[str]:
    """Refuse an attack that elongates nothing; warn when many texts fill the window alone (METHODS §1: m is
    capped at ⌊(N − 2)/n⌋, so a text over half the window keeps m = 1 and its pairs cannot move)."""
    can_double = lengths * 2 <= view.max_content
    if not can_double.any():
        raise NothingElongatedError(
            "max_length",
            view.max_length,
            f"elongation changes no text: at N = {view.max_length} the window holds {view.max_content} content "
            "tokens and no text is short enough for two copies (m is capped at 1), so the attack would compare each "
            "pair with itself; raise max_length, cut the texts first with first_k, or audit shorter texts",
        )
    if not (factors >= 2).any():
        raise NothingElongatedError(
            "elongation",
            config.elongation.describe(),
            "gave m = 1 to every text, so the attack would compare each pair with itself; use m ≥ 2, 'twice', or "
            "another seed",
        )
    stuck = int((~can_double).sum())
    if stuck / len(lengths) < WARN_SHARE:
        return []
    return [
        f"{stuck} of {len(lengths)} texts ({stuck / len(lengths):.0%}) have more than {view.max_content // 2} "
        f"content tokens and cannot hold two copies at N = {view.max_length}: they stay unchanged, which "
        "pulls the attack's shift towards 0"
    ]


@dataclass
class _Plan:
    """Every sequence one audit embeds, in one bank, and where each group of them sits (rows of the bank)."""

    view: TokenView
    lengths: np.ndarray  # (2n,) content tokens of text 1s then text 2s, after any first-k cut
    factors: np.ndarray  # (2n,) elongation factor m of each text
    cut: int  # texts longer than the window
    bank: _SequenceBank
    original: tuple[np.ndarray, np.ndarray]
    elongated: tuple[np.ndarray, np.ndarray]
    curve: dict[int, tuple[np.ndarray, np.ndarray]]
    shuffled: np.ndarray | None


def _plan(model: SentenceTransformer, pairs: PairSet, config: AuditConfig) -> _Plan:
    """Tokenize once and build every sequence the audit embeds: originals, elongations, first-k cuts, shuffles."""
    rng = random.Random(config.seed)
    view = TokenView(model)
    max_content = view.max_content
    if config.first_k is not None:
        max_content = min(max_content, config.first_k - view.specials.count)
    texts1 = [p.text1 for p in pairs.pairs]
    texts2 = [p.text2 for p in pairs.pairs]
    # one token past the window tells a text that is cut (n > N - 2) from one that just fits (n = N - 2)
    full1 = content_ids(view.tokenizer, texts1, view.max_content + 1, pairs.names(1))
    full2 = content_ids(view.tokenizer, texts2, view.max_content + 1, pairs.names(2))
    cut = sum(len(ids) > view.max_content for ids in full1 + full2)
    ids1 = [ids[:max_content] for ids in full1]
    ids2 = [ids[:max_content] for ids in full2]
    factors1 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids1]
    factors2 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids2]
    bank = _SequenceBank()
    original = (bank.add([view.wrap(i) for i in ids1]), bank.add([view.wrap(i) for i in ids2]))
    elongated = (
        bank.add([view.wrap(elongate(i, m, view.max_content)) for i, m in zip(ids1, factors1, strict=True)]),
        bank.add([view.wrap(elongate(i, m, view.max_content)) for i, m in zip(ids2, factors2, strict=True)]),
    )
    curve = {
        k: (
            bank.add([view.wrap(first_k(i, k - view.specials.count)) for i in ids1]),
            bank.add([view.wrap(first_k(i, k - view.specials.count)) for i in ids2]),
        )
        for k in config.curve_ks
        if k <= view.max_length
    }
    shuffled = None
    if config.word_shuffle:
        # shuffle only the words the model reads: the part of text 1 that survives truncation (laser3 §6.1)
        shuffle_rng = random.Random(config.seed + 1)
        kept = [kept_text(view.tokenizer, text, max_content) for text in texts1]
        shuffled_texts = [shuffle_words(text, shuffle_rng) for text in kept]
        shuffled_ids = [ids[:max_content] for ids in view.content(shuffled_texts, pairs.names(1))]
        shuffled = bank.add([view.wrap(i) for i in shuffled_ids])
    lengths = np.array([len(i) for i in ids1 + ids2])
    factors = np.array(factors1 + factors2)
    return _Plan(view, lengths, factors, cut, bank, original, elongated, curve, shuffled)


def _attack_sections(
    plan: _Plan, embeddings: np.ndarray, pairs: PairSet, config: AuditConfig
) -> tuple[AttackSection, dict[str, ShiftSection], list[FirstKRow], WordShuffleSection | None, Similarities]:
    """The attack, its split by pair kind, the first-k curve, the word shuffle and the raw similarities."""
    spec = config.histogram

    def cosines(side1: np.ndarray, side2: np.ndarray) -> np.ndarray:
        return paired_cosine(embeddings[side1], embeddings[side2])

    before, after = cosines(*plan.original), cosines(*plan.elongated)
    histogram = {
        "bins": spec.bins,
        "range": [spec.low, spec.high],
        "before": _histogram_dict(before, spec),
        "after": _histogram_dict(after, spec),
    }
    attack = cast(
        AttackSection,
        {
            **_shift(before, after, spec),
            **_null(before, after, config),
            "elongation": config.elongation.describe(),
            "histogram": histogram,
        },
    )
    kinds = sorted({p.kind for p in pairs.pairs if p.kind is not None})
    by_kind: dict[str, ShiftSection] = {}
    for kind in kinds:
        mask = np.array([p.kind == kind for p in pairs.pairs])
        by_kind[kind] = _shift(before[mask], after[mask], spec)
    curve_rows: list[FirstKRow] = []
    for k, (side1, side2) in plan.curve.items():
        sims = cosines(side1, side2)
        curve_rows.append({"k": k, "mean": float(sims.mean()), "median": float(np.median(sims)),
                           "std": float(sims.std()), "js_distance_vs_full": js_distance(before, sims, spec),
                           "histogram": _histogram_dict(sims, spec)})  # fmt: skip
    shuffle_section: WordShuffleSection | None = None
    if plan.shuffled is not None:
        shuffled_sims = paired_cosine(embeddings[plan.shuffled], embeddings[plan.original[1]])
        shuffle_section = cast(
            WordShuffleSection, {**_shift(before, shuffled_sims, spec), **_null(before, shuffled_sims, config)}
        )
        shuffle_section["histogram"] = _histogram_dict(shuffled_sims, spec)
    similarities: Similarities = {
        "before": [round(float(x), 6) for x in before],
        "after": [round(float(x), 6) for x in after],
    }
    if kinds:
        similarities["kind"] = [p.kind for p in pairs.pairs]
    return attack, by_kind, curve_rows, shuffle_section, similarities


def _tokens_section(plan: _Plan, sequences: Sequence[Sequence[int]]) -> TokensSection:
    """What was embedded: lengths before and after elongation, the factors m, sequences and tokens."""
    lengths, factors = plan.lengths, plan.factors
    elongated_lengths = np.array([len(sequences[j]) for j in np.concatenate(plan.elongated)])
    return {
        "max_length": plan.view.max_length,
        "special_tokens": plan.view.specials.count,
        "content_mean": float(lengths.mean()),
        "content_median": float(np.median(lengths)),
        "content_max": int(lengths.max()),
        "truncated_texts": int(plan.cut),
        "elongated_mean": float(elongated_lengths.mean()),
        "m_mean": float(factors.mean()),
        "m_min": int(factors.min()),
        "m_max": int(factors.max()),
        "sequences_embedded": len(sequences),
        "tokens_embedded": int(sum(len(s) for s in sequences)),
        "texts_elongated": int((factors >= 2).sum()),
    }


def run_audit(
    model: SentenceTransformer,
    pairs: PairSet,
    config: AuditConfig = AuditConfig(),
    *,
    model_name: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> AuditResult:
    """Run the elongation attack, the first-k curve and the word-shuffle probe on `pairs`.

    `model_name` is recorded in the result's model fingerprint. `on_progress(done, total)` is called after
    each embedded batch (sequences done / to do). Raises `NothingElongatedError` when no text can be elongated.
    """
    started = time.perf_counter()
    plan = _plan(model, pairs, config)
    warnings = _check_elongation(plan.lengths, plan.factors, plan.view, config)
    sequences = plan.bank.sequences()
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(done, len(sequences))

    embeddings = embed_ids(model, sequences, batch_size=config.batch_size, on_batch=advance)
    attack, by_kind, curve_rows, shuffle_section, similarities = _attack_sections(plan, embeddings, pairs, config)
    return AuditResult(
        attack=attack,
        tokens=_tokens_section(plan, sequences),
        first_k_curve=curve_rows,
        word_shuffle=shuffle_section,
        attack_by_kind=by_kind,
        similarities=similarities,
        settings=config.to_dict(),
        model=model_fingerprint(model, model_name or "<in-memory model>"),
        data=pairs.describe(),
        meta={
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 3),
            "environment": environment(),
        },
        warnings=warnings,
    )


def _null(before: np.ndarray, after: np.ndarray, config: AuditConfig) -> dict[str, Any]:
    """`{"js_null": …}`: the JS distance's permutation null (noise level, p-value), or nothing when switched off."""
    if not config.null_permutations:
        return {}
    null = js_distance_null(before, after, config.histogram, permutations=config.null_permutations, seed=config.seed)
    return {"js_null": {k: v for k, v in null.to_dict().items() if k != "observed"}}
