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
from typing import Any

import numpy as np
from sentence_transformers import SentenceTransformer

from lengthwise.audit.shift import (
    HistogramSpec,
    js_distance,
    js_distance_null,
    paired_cosine,
    similarity_histogram,
    similarity_shift,
)
from lengthwise.core.data import PairSet
from lengthwise.core.embed import TokenView, embed_ids
from lengthwise.core.models import model_fingerprint
from lengthwise.core.results import environment
from lengthwise.core.tokens import Elongation, elongate, elongation_factor, first_k, shuffle_words

__all__ = ["AuditConfig", "AuditResult", "run_audit"]

DEFAULT_CURVE_KS = (16, 32, 64, 128, 256, 512)


@dataclass(frozen=True)
class AuditConfig:
    """Settings of one audit run.

    `first_k` truncates every text to its first k tokens (special tokens included) before anything else —
    the length-attack paper's "first 64 tokens vs 8 copies" setting is ``first_k=64, elongation=8`` at N=512.
    `curve_ks` are input lengths (special tokens included) for the semantic-altered curve; k > N is skipped.
    `null_permutations` within-pair swaps give the JS distance's noise level and p-value (0 = skip).
    """

    elongation: Elongation = field(default_factory=lambda: Elongation("fixed", 100))
    first_k: int | None = None
    curve_ks: tuple[int, ...] = DEFAULT_CURVE_KS
    word_shuffle: bool = True
    histogram: HistogramSpec = field(default_factory=HistogramSpec)
    batch_size: int = 32
    seed: int = 0
    null_permutations: int = 200

    def __post_init__(self) -> None:
        if self.null_permutations < 0:
            raise ValueError(f"null_permutations={self.null_permutations} must be ≥ 0")
        if self.first_k is not None and self.first_k < 3:
            raise ValueError(f"first_k={self.first_k} leaves no content token; use at least 3")
        if any(k < 3 for k in self.curve_ks):
            raise ValueError(f"curve lengths {self.curve_ks} must all be ≥ 3 tokens")
        if self.batch_size < 1:
            raise ValueError(f"batch size {self.batch_size} must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        settings = asdict(self)
        settings["elongation"] = self.elongation.describe()
        settings["histogram"] = {
            "bins": self.histogram.bins,
            "range": [self.histogram.low, self.histogram.high],
        }
        return settings


@dataclass(frozen=True)
class AuditResult:
    """Everything an audit measured, as plain data; `to_dict()` is what `audit.json` holds."""

    attack: dict[str, Any]
    tokens: dict[str, Any]
    first_k_curve: list[dict[str, Any]]
    word_shuffle: dict[str, Any] | None
    attack_by_kind: dict[str, dict[str, Any]]
    similarities: dict[str, list[Any]]  # before/after cosines per pair; `kind` per pair when the data has kinds
    settings: dict[str, Any]
    model: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    each embedded batch (sequences done / to do).
    """
    started = time.perf_counter()
    rng = random.Random(config.seed)
    view = TokenView(model)
    max_content = view.max_content
    if config.first_k is not None:
        max_content = min(max_content, config.first_k - view.specials.count)
    texts1 = [p.text1 for p in pairs.pairs]
    texts2 = [p.text2 for p in pairs.pairs]
    ids1 = [ids[:max_content] for ids in view.content(texts1)]
    ids2 = [ids[:max_content] for ids in view.content(texts2)]
    factors1 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids1]
    factors2 = [elongation_factor(len(ids), view.max_content, config.elongation, rng) for ids in ids2]

    bank = _SequenceBank()
    original = (bank.add([view.wrap(i) for i in ids1]), bank.add([view.wrap(i) for i in ids2]))
    elongated = (
        bank.add([view.wrap(elongate(i, m, view.max_content)) for i, m in zip(ids1, factors1, strict=True)]),
        bank.add([view.wrap(elongate(i, m, view.max_content)) for i, m in zip(ids2, factors2, strict=True)]),
    )
    curve_ks = [k for k in config.curve_ks if k <= view.max_length]
    curve = {
        k: (
            bank.add([view.wrap(first_k(i, k - view.specials.count)) for i in ids1]),
            bank.add([view.wrap(first_k(i, k - view.specials.count)) for i in ids2]),
        )
        for k in curve_ks
    }
    shuffled = None
    if config.word_shuffle:
        shuffle_rng = random.Random(config.seed + 1)
        shuffled_ids = [ids[:max_content] for ids in view.content([shuffle_words(t, shuffle_rng) for t in texts1])]
        shuffled = bank.add([view.wrap(i) for i in shuffled_ids])

    sequences = bank.sequences()
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(done, len(sequences))

    embeddings = embed_ids(model, sequences, batch_size=config.batch_size, on_batch=advance)
    spec = config.histogram

    def cosines(side1: np.ndarray, side2: np.ndarray) -> np.ndarray:
        return paired_cosine(embeddings[side1], embeddings[side2])

    before = cosines(*original)
    after = cosines(*elongated)
    attack: dict[str, Any] = {**similarity_shift(before, after, spec).to_dict(), **_null(before, after, config)}
    attack.update(
        elongation=config.elongation.describe(),
        histogram={
            "bins": spec.bins,
            "range": [spec.low, spec.high],
            "before": _histogram_dict(before, spec),
            "after": _histogram_dict(after, spec),
        },
    )

    by_kind: dict[str, dict[str, Any]] = {}
    kinds = sorted({p.kind for p in pairs.pairs if p.kind is not None})
    for kind in kinds:
        mask = np.array([p.kind == kind for p in pairs.pairs])
        by_kind[kind] = similarity_shift(before[mask], after[mask], spec).to_dict()

    curve_rows = []
    for k, (side1, side2) in curve.items():
        sims = cosines(side1, side2)
        curve_rows.append(
            {
                "k": k,
                "mean": float(sims.mean()),
                "median": float(np.median(sims)),
                "std": float(sims.std()),
                "js_distance_vs_full": js_distance(before, sims, spec),
                "histogram": _histogram_dict(sims, spec),
            }
        )

    shuffle_section: dict[str, Any] | None = None
    if shuffled is not None:
        shuffled_sims = paired_cosine(embeddings[shuffled], embeddings[original[1]])
        shuffle_section = {
            **similarity_shift(before, shuffled_sims, spec).to_dict(),
            **_null(before, shuffled_sims, config),
        }
        shuffle_section["histogram"] = _histogram_dict(shuffled_sims, spec)

    lengths = np.array([len(i) for i in ids1 + ids2])
    factors = np.array(factors1 + factors2)
    elongated_lengths = np.array([len(sequences[j]) for j in np.concatenate(elongated)])
    tokens = {
        "max_length": view.max_length,
        "special_tokens": view.specials.count,
        "content_mean": float(lengths.mean()),
        "content_median": float(np.median(lengths)),
        "content_max": int(lengths.max()),
        "truncated_texts": int((lengths >= view.max_content).sum()),
        "elongated_mean": float(elongated_lengths.mean()),
        "m_mean": float(factors.mean()),
        "m_min": int(factors.min()),
        "m_max": int(factors.max()),
        "sequences_embedded": len(sequences),
        "tokens_embedded": int(sum(len(s) for s in sequences)),
    }
    return AuditResult(
        attack=attack,
        tokens=tokens,
        first_k_curve=curve_rows,
        word_shuffle=shuffle_section,
        attack_by_kind=by_kind,
        similarities={
            "before": [round(float(x), 6) for x in before],
            "after": [round(float(x), 6) for x in after],
            **({"kind": [p.kind for p in pairs.pairs]} if kinds else {}),
        },
        settings=config.to_dict(),
        model=model_fingerprint(model, model_name or "<in-memory model>"),
        data=pairs.describe(),
        meta={
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.perf_counter() - started, 3),
            "environment": environment(),
        },
    )


def _null(before: np.ndarray, after: np.ndarray, config: AuditConfig) -> dict[str, Any]:
    """`{"js_null": …}`: the JS distance's permutation null (noise level, p-value), or nothing when switched off."""
    if not config.null_permutations:
        return {}
    null = js_distance_null(before, after, config.histogram, permutations=config.null_permutations, seed=config.seed)
    return {"js_null": {k: v for k, v in null.to_dict().items() if k != "observed"}}
