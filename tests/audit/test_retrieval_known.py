"""Known-answer tests of the retrieval length-bias audit: a synthetic encoder with a built-in length term must
show the bias with its sign and size; the same encoder without the term must show no significant bias.

The synthetic encoder embeds a text as ``[cos θ · c(text), sin θ · (cos φ(n), sin φ(n))]``: `c` is the normalised
mean of random vectors of the text's *key* tokens (other tokens weigh nothing), n its token count and
``cos φ(n) = clip(c0 + slope · n)``; queries carry ``sin θ · (1, 0)``. So a document's score is exactly
``cos² θ · c(q)·c(d) + sin² θ · cos φ(n)``: content plus a length term of known slope (zero: length-blind).
Repetition leaves `c` unchanged and position never changes the multiset of tokens, so their effects are known.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from lengthwise.audit.retrieval.config import RetrievalAuditConfig
from lengthwise.audit.retrieval.natural import audit_retrieval
from lengthwise.core.embed import TokenView

SIN2 = 0.5  # sin² θ: weight of the length term
SLOPE = -1 / 300  # the biased encoder: every extra token costs SIN2/300 of score (prefers short documents)
WINDOW = 240


@dataclass(frozen=True)
class Split:
    """A BEIR split in memory (the audit's `RetrievalSplit` protocol)."""

    doc_ids: tuple[str, ...]
    doc_texts: tuple[str, ...]
    query_ids: tuple[str, ...]
    query_texts: tuple[str, ...]
    qrels: dict[str, dict[str, int]]
    calls: list[int] = field(default_factory=list, compare=False)

    def describe(self) -> dict[str, object]:
        return {"source": "synthetic", "n_documents": len(self.doc_ids), "n_queries": len(self.query_ids)}


def _words(tokenizer, count: int, skip: set[str], rng: random.Random) -> list[str]:
    vocab = sorted(w for w in tokenizer.get_vocab() if re.fullmatch(r"[a-z]{5,9}", w) and w not in skip)
    return rng.sample(vocab, count)


def synthetic_split(tokenizer, n_docs: int = 240, n_queries: int = 80, seed: int = 0) -> tuple[Split, set[str]]:
    """Documents of 4 key words in 20–200 tokens of neutral words, in sentences; each query is two key words of
    its one relevant document plus two random key words, so the relevant document's rank varies by content."""
    rng = random.Random(seed)
    keys = _words(tokenizer, 160, set(), rng)
    neutral = _words(tokenizer, 400, set(keys), rng)
    docs, doc_keys = [], []
    for _ in range(n_docs):
        chosen = rng.sample(keys, 4)
        words = rng.choices(neutral, k=rng.randint(20, 200))
        for key in chosen:
            words.insert(rng.randrange(len(words) + 1), key)
        sentences = [" ".join(words[i : i + 9]).capitalize() + "." for i in range(0, len(words), 9)]
        docs.append(" ".join(sentences))
        doc_keys.append(chosen)
    relevant = rng.sample(range(n_docs), n_queries)
    queries = [" ".join([*doc_keys[d][:2], *rng.sample(keys, 2)]) for d in relevant]
    split = Split(
        doc_ids=tuple(f"d{i}" for i in range(n_docs)),
        doc_texts=tuple(docs),
        query_ids=tuple(f"q{i}" for i in range(n_queries)),
        query_texts=tuple(queries),
        qrels={f"q{i}": {f"d{d}": 1} for i, d in enumerate(relevant)},
    )
    return split, set(keys)


@dataclass
class LengthTermEncoder:
    """The synthetic `TextEncoder` of the module docstring; `encoded` counts the documents it embedded."""

    tokenizer: object
    keys: set[str]
    slope: float
    dim: int = 48
    c0: float = 0.5
    encoded: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(1)
        vocab = self.tokenizer.get_vocab()
        self.vectors = {vocab[key]: rng.standard_normal(self.dim) for key in sorted(self.keys)}

    def _content(self, ids: Sequence[int]) -> np.ndarray:
        """Unit norm always: a faint constant direction keeps a text without key words from having no content."""
        total = sum((self.vectors[i] for i in ids if i in self.vectors), np.eye(self.dim)[0] * 1e-3)
        return total / np.linalg.norm(total)

    def _embed(self, texts: Sequence[str], query: bool) -> np.ndarray:
        rows = []
        for ids in self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]:
            cos_phi = 1.0 if query else float(np.clip(self.c0 + self.slope * len(ids), -1.0, 1.0))
            tail = [cos_phi, np.sqrt(1.0 - cos_phi**2)]
            rows.append(np.concatenate([np.sqrt(1 - SIN2) * self._content(ids), np.sqrt(SIN2) * np.asarray(tail)]))
        return np.asarray(rows, dtype=np.float32)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._embed(texts, query=False)

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self._embed(texts, query=True)

    def encode_documents(
        self, texts: Sequence[str], *, batch_size: int = 32, show_progress: bool = False
    ) -> np.ndarray:
        self.encoded.append(len(texts))
        return self._embed(texts, query=False)


CONFIG = RetrievalAuditConfig(window=WINDOW, repetition=(2,), bootstrap_resamples=500, max_negatives=None)


@pytest.fixture(scope="module")
def view(tiny_model) -> TokenView:
    return TokenView(tiny_model)


@pytest.fixture(scope="module")
def split_keys(view):
    return synthetic_split(view.tokenizer)


@pytest.fixture(scope="module")
def audits(view, split_keys):
    split, keys = split_keys
    results = {}
    for name, slope in (("biased", SLOPE), ("blind", 0.0)):
        encoder = LengthTermEncoder(view.tokenizer, keys, slope)
        results[name] = (audit_retrieval(encoder, split, view, CONFIG), encoder)
    return results


def test_natural_bias_has_the_built_in_sign_and_the_blind_encoder_none(audits) -> None:
    biased, blind = audits["biased"][0]["natural"], audits["blind"][0]["natural"]
    rank = biased["rank_vs_length"]["correlation"]
    assert rank["rho"] > 0.2 and rank["p_value"] < 0.01  # longer relevant documents rank lower
    assert biased["score_length"]["partial_rho"] < -0.5 and biased["score_length"]["wilcoxon_p"] < 0.001
    assert biased["top_k_lengths"]["retrieved_percentile"]["ci95"][1] < 0.5  # the top 10 lean short
    assert blind["rank_vs_length"]["correlation"]["p_value"] > 0.05
    assert abs(blind["score_length"]["partial_rho"]) < 0.05
    low, high = blind["top_k_lengths"]["retrieved_percentile"]["ci95"]
    assert low <= 0.5 <= high


def test_repetition_moves_the_score_by_exactly_the_length_term(audits) -> None:
    for target in ("relevant", "non_relevant"):
        biased = audits["biased"][0]["controlled"]["repetition"][target]["m=2"]
        blind = audits["blind"][0]["controlled"]["repetition"][target]["m=2"]
        expected = SIN2 * SLOPE * (biased["tokens_mean"] - biased["tokens_before_mean"])
        assert biased["score"]["mean_delta"] == pytest.approx(expected, abs=1e-5)
        assert biased["rank"]["mean_delta"] > 0 and biased["rank"]["p_value"] < 0.001  # repeated = longer = lower
        assert blind["score"]["n_changed"] == 0 or max(map(abs, blind["score"]["ci95"])) < 1e-5
        assert blind["rank"]["p_value"] > 0.05 and blind["rank"]["mean_delta"] == pytest.approx(0.0, abs=0.5)


def test_dilution_differs_from_the_blind_encoder_by_the_length_term(audits) -> None:
    for label, biased in audits["biased"][0]["controlled"]["dilution"].items():
        blind = audits["blind"][0]["controlled"]["dilution"][label]
        expected = SIN2 * SLOPE * (biased["tokens_mean"] - biased["tokens_before_mean"])
        assert biased["score"]["mean_delta"] - blind["score"]["mean_delta"] == pytest.approx(expected, abs=1e-4)
        assert biased["rank"]["mean_delta"] > blind["rank"]["mean_delta"]


def test_position_has_no_effect_on_an_order_blind_encoder(audits) -> None:
    for name in ("biased", "blind"):
        for unit in audits[name][0]["controlled"]["position"].values():
            assert unit["friedman"]["p_value"] == 1.0
            recalls = {setting["recall_after"] for setting in unit["depths"].values()}
            assert len(recalls) == 1


def test_verdicts_name_the_bias_only_where_it_was_built_in(audits) -> None:
    biased = {v["bias"]: v for v in audits["biased"][0]["verdicts"]}
    blind = {v["bias"]: v for v in audits["blind"][0]["verdicts"]}
    for bias in ("rank_vs_length", "score_length", "top_k_lengths", "repetition_relevant"):
        assert biased[bias]["significant"] and not blind[bias]["significant"], bias
    assert (
        "lose" in biased["repetition_relevant"]["text"] and "ranks on average" in biased["repetition_relevant"]["text"]
    )
    assert "rank lower" in biased["rank_vs_length"]["text"]


def test_the_corpus_is_embedded_once_and_then_only_perturbed_documents(audits, split_keys) -> None:
    section, encoder = audits["biased"]
    split, _ = split_keys
    cost = section["cost"]
    assert sum(encoder.encoded) == len(split.doc_texts) + cost["sentences_embedded"] + cost["perturbed_embedded"]
    assert cost["roundtrip_exact"] == 1.0
    assert section["controlled"]["n_pairs"] == len(split.query_ids)
