"""Hybrid document search: the window index (dense) and BM25 (lexical), fused, with each hit's passages.

The two sides find different documents: windows find paraphrases and meaning, BM25 finds names, numbers and rare
terms. Each side proposes its `depth` best documents; every proposed document is then scored *exactly* on both
sides (its dense score over all its windows in fp32, its BM25 score from the matrix), and the two are fused:

- ``convex``: ``(1 - w) · dense' + w · lexical'``, each side normalised by its theoretical minimum and the
  query's best score (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023,
  arXiv:2210.11934, "TMM": cosine from −1, BM25 from 0). Bruch et al. found a tuned convex combination better than
  RRF and insensitive to its normaliser; the weight `w` is tuned on a dev split and recorded in the index.
- ``rrf``: reciprocal rank fusion, ``Σ 1 / (60 + rank)`` (Cormack, Clarke & Büttcher, SIGIR 2009).
- ``zscore`` (the default, at w = 0.3, since issue 49), ``minmax``, ``dbsf``: ``(1 - w) · dense' + w · lexical'`` with
  each side rescaled by its own scores over the query's proposed documents (z-score; min to max; Qdrant's
  distribution-based mean ± 3σ, clipped);
  ``adaptive``: ``zscore`` with the weights set per query from each side's spread (`lengthwise.core.fusion`).

Because convex's normalisers use only the query's best score on each side (which the proposals always hold), a
convex score does not depend on which other documents were proposed: the fused top-k equals an exact fused scan of
every document whenever each of its documents is among either side's proposals (`exact_fused` checks it). The
rules normalised over the candidates (and RRF's ranks) depend on the proposals: their exact scan (`fuse_exact`)
fuses the union of each side's exact `depth` best documents, as the search fuses the union of its proposals.

A hit carries its best windows as passages: the character span in the document's text and the text, ranked by the
window's own dense cosine (dense and hybrid) or by the query terms it holds (lexical).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, cast

import numpy as np
import torch

from lengthwise.core.errors import SettingError, enum_member
from lengthwise.core.fusion import FUSION, FUSION_WEIGHT, convex_fuse, fuse_normalised
from lengthwise.core.parallel import each, search_pool
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc.search.lexical import side_scores, side_scores_at

__all__ = [
    "Fusion",
    "FusionSettings",
    "Hit",
    "HybridSearch",
    "Mode",
    "Passage",
    "exact_candidates",
    "fuse",
    "fuse_exact",
]

RRF_K = 60  # Cormack et al.'s constant
DEPTH = 100  # documents each side proposes per query (at least 10·k)
WEIGHT = FUSION_WEIGHT  # the default lexical weight of the default fusion (lengthwise.core.fusion says how chosen)


class Mode(str, Enum):
    """Which evidence ranks the documents."""

    DENSE = "dense"  # the window vectors (ANN candidates, exact rescoring)
    LEXICAL = "lexical"  # BM25 over the documents' text
    HYBRID = "hybrid"  # both, fused


class Fusion(str, Enum):
    """How a hybrid search combines the two sides."""

    CONVEX = "convex"
    RRF = "rrf"
    ZSCORE = "zscore"
    MINMAX = "minmax"
    DBSF = "dbsf"
    ADAPTIVE = "adaptive"


DEFAULT_RULE = Fusion(FUSION)  # the default rule (lengthwise.core.fusion says how chosen)
CANDIDATE_FUSIONS = (Fusion.RRF, Fusion.ZSCORE, Fusion.MINMAX, Fusion.DBSF, Fusion.ADAPTIVE)  # depend on proposals


def pick_mode(mode: str | None, lexical: Any, without_text: str) -> Mode:
    """The search `mode` asked for (``dense``, ``lexical`` or ``hybrid``), checked against an index's `lexical` side
    (None: it holds no text; `without_text` then says why a mode that needs text is refused). None: the mode recorded
    by tuning, else hybrid when the index holds text, else dense."""
    if mode is None:
        recorded = lexical.settings.get("mode") if lexical is not None else None
        return Mode(recorded) if recorded else (Mode.HYBRID if lexical is not None else Mode.DENSE)
    try:
        chosen = Mode(mode)
    except ValueError:
        raise SettingError("mode", mode, "use dense, lexical or hybrid") from None
    if chosen is not Mode.DENSE and lexical is None:
        raise SettingError("mode", mode, without_text)
    return chosen


@dataclass(frozen=True)
class FusionSettings:
    """How a hybrid search fuses: the rule, the lexical weight (convex) and each side's proposals per query.

    Args:
        fusion: ``convex``, ``rrf``, ``zscore``, ``minmax``, ``dbsf`` or ``adaptive`` (module docstring).
        weight: The lexical side's weight in [0, 1] (0: dense only, 1: BM25 only) for convex, zscore, minmax and
            dbsf; rrf and adaptive do not use it.
        depth: Documents each side proposes per query (at least 10 · k are taken).
    """

    fusion: Fusion = DEFAULT_RULE
    weight: float = WEIGHT
    depth: int = DEPTH

    def __post_init__(self) -> None:
        object.__setattr__(self, "fusion", enum_member(Fusion, "fusion", self.fusion))
        if not isinstance(self.weight, (int, float)) or not 0.0 <= self.weight <= 1.0:
            raise SettingError("weight", self.weight, "the lexical weight must be in [0, 1]")
        if self.depth < 1:
            raise SettingError("depth", self.depth, "must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        return {"fusion": self.fusion.value, "weight": self.weight, "depth": self.depth}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionSettings:
        return cls(Fusion(data["fusion"]), float(data["weight"]), int(data.get("depth", DEPTH)))

    @classmethod
    def recorded(cls, lexical: Any) -> FusionSettings:
        """The fusion recorded in an index's `lexical` side (None: it holds no text); the defaults where none is."""
        found = lexical.settings.get("fusion") if lexical is not None else None
        return cls.from_dict(found) if found else cls()


@dataclass(frozen=True)
class Passage:
    """A window of a hit: its number in the document, its character span in the text, the text and its score."""

    window: int
    start: int
    end: int
    score: float
    text: str


@dataclass(frozen=True)
class Hit:
    """One document found for a query: its id and fused score (the side's own score in a one-sided mode), each
    side's exact score where computed, and its best passages."""

    id: str
    score: float
    dense: float | None = None
    lexical: float | None = None
    passages: tuple[Passage, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: scores rounded to 6 places, passages only when there are some."""
        out: dict[str, Any] = {"id": self.id, "score": round(self.score, 6)}
        for name in ("dense", "lexical"):
            value = getattr(self, name)
            if value is not None:
                out[name] = round(value, 6)
        if self.passages:
            out["passages"] = [{**asdict(p), "score": round(p.score, 6)} for p in self.passages]
        return out


def fuse(dense: np.ndarray, lexical: np.ndarray, settings: FusionSettings) -> np.ndarray:
    """Fused scores of documents from their exact dense and lexical scores (same order: one query's proposed
    documents). `lexical`: (n,) one BM25 side, or (s, n) several (both granularities), which share the lexical
    weight equally.

    Convex: each side from its theoretical minimum (cosine −1, BM25 0) to the query's best score (`dense.max()`,
    `lexical.max()`: the proposals always hold each side's best document). RRF: ranks within the given documents.
    zscore, minmax, dbsf: each side rescaled by its scores over the given documents; adaptive: zscore weighted per
    query by each side's spread (`lengthwise.core.fusion`).
    """
    sides = list(np.atleast_2d(lexical))
    if settings.fusion is Fusion.RRF:
        return sum((_rrf_ranks(side, zero_last=True) for side in sides), _rrf_ranks(dense))
    if settings.fusion is Fusion.CONVEX:  # (1 − w) · dense' + Σ (w / s) · side', the mean of each side's fusion
        return np.mean([convex_fuse(dense, side, settings.weight) for side in sides], axis=0)
    if settings.fusion is Fusion.ADAPTIVE:
        return fuse_normalised([dense, *sides], None, "zscore")
    share = settings.weight / len(sides)
    return fuse_normalised([dense, *sides], [1.0 - settings.weight] + [share] * len(sides), settings.fusion.value)


def exact_candidates(dense: np.ndarray, lexical: np.ndarray, depth: int) -> np.ndarray:
    """The documents a search with exact proposals fuses: the union of each side's `depth` best (sorted numbers;
    `lexical`: one side's scores, or several rows)."""
    return np.union1d(_top(dense, depth), np.concatenate([_top(side, depth) for side in np.atleast_2d(lexical)]))


def fuse_exact(dense: np.ndarray, lexical: np.ndarray, settings: FusionSettings, depth: int) -> np.ndarray:
    """Fused scores of every document from its exact scores on both sides, as a search whose proposals were exact
    would rank them: convex fuses every document (its score does not depend on the others); the other rules fuse
    `exact_candidates` and leave every other document at −inf."""
    if settings.fusion not in CANDIDATE_FUSIONS:
        return fuse(dense, lexical, settings)
    chosen = exact_candidates(dense, lexical, depth)
    out = np.full(len(dense), -np.inf)
    out[chosen] = fuse(dense[chosen], np.atleast_2d(lexical)[:, chosen], settings)
    return out


def _rrf_ranks(scores: np.ndarray, *, zero_last: bool = False) -> np.ndarray:
    """1 / (60 + rank) of each score (rank 1 = best; ties broken by order); a BM25 score of 0 (no query term)
    contributes nothing."""
    order = np.argsort(-scores, kind="stable")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    out = 1.0 / (RRF_K + ranks)
    return np.where(scores > 0, out, 0.0) if zero_last else out


class HybridSearch:
    """Searches one `LongIndex` (dense) and its `LexicalIndex` (lexical; None for an index built without text).

    Args:
        windows: The dense window index (`lengthwise.longdoc.search.index.LongIndex`).
        lexical: Its lexical side (`lengthwise.longdoc.search.lexical.LexicalIndex`), or None.
        scoring: How a document scores from its windows.
        settings: The fusion settings (those recorded in the index by default).
    """

    def __init__(self, windows: Any, lexical: Any, scoring: WindowScoring, settings: FusionSettings) -> None:
        self.windows, self.lexical, self.scoring, self.settings = windows, lexical, scoring, settings

    def search(
        self,
        vectors: np.ndarray | None,
        texts: Sequence[str],
        k: int,
        mode: Mode,
        *,
        passages: int = 0,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> list[list[Hit]]:
        """The `k` best documents per query (`vectors`: unit query rows, None in lexical mode); `candidates` and
        `probes`: the dense side's (`LongIndex.search_vectors`). The dense side's candidates of every query come
        from one engine call; then each query is scored, fused and cut into passages on one of `search_threads`
        threads (`lengthwise.core.parallel`; default one per core less one), by the same code as alone."""
        depth = max(self.settings.depth, 10 * k)
        dense_lists: list[Any] = [[] for _ in texts]
        if mode is Mode.DENSE:
            assert vectors is not None
            dense_lists = self.windows.search_vectors(vectors, k, scoring=self.scoring, candidates=candidates,
                                                      probes=probes, search_threads=search_threads)  # fmt: skip
        elif mode is Mode.HYBRID:  # the dense side's proposals, ranked on their candidate windows; scored below
            assert vectors is not None
            dense_lists = self.windows.proposals(vectors, depth, scoring=self.scoring, candidates=candidates,
                                                 probes=probes, search_threads=search_threads)  # fmt: skip

        units = [None if vectors is None else torch.nn.functional.normalize(
            torch.as_tensor(np.asarray(vectors[n], dtype=np.float32)), dim=-1) for n in range(len(texts))]  # fmt: skip
        wholes: list[torch.Tensor | None] = [None] * len(texts)
        if mode is Mode.HYBRID and len(texts):  # every document proposed: scored for the whole batch at once
            stacked = torch.stack(cast(list[torch.Tensor], units))
            wholes = self.windows.whole_scans(stacked, self.scoring, depth, search_threads)

        def one(n: int) -> list[Hit]:  # BM25's tokenizer (PyStemmer) holds the GIL: its calls never overlap
            text, query = texts[n], units[n]
            docs, fused, dense, lexical = self._ranked(mode, text, query, dense_lists[n], depth, k, wholes[n])
            return [self._hit(d, f, dn, lx, query, text, passages)
                    for d, f, dn, lx in zip(docs, fused, dense, lexical, strict=True)]  # fmt: skip

        return each(search_pool(search_threads, len(texts)), one, range(len(texts)))

    def _ranked(
        self,
        mode: Mode,
        text: str,
        query: torch.Tensor | None,
        found: Any,
        depth: int,
        k: int,
        whole: torch.Tensor | None = None,
    ) -> tuple[np.ndarray, np.ndarray, list[float | None], list[float | None]]:
        """Document numbers, fused scores and each side's score of the `k` best, best first (`found`: the dense
        hits in dense mode, the dense side's proposed document numbers in hybrid mode; `whole`: every document's
        dense scores when the batch read them at once)."""
        if mode is Mode.DENSE:
            docs = np.asarray([self.windows.numbers[i] for i, _ in found], dtype=np.int64)
            scores = np.asarray([s for _, s in found], dtype=np.float64)
            return docs, scores, list(scores), [None] * len(docs)
        if mode is Mode.LEXICAL or query is None:
            all_lexical = self.lexical.scores(text)
            docs = _top(all_lexical, k)
            docs = docs[all_lexical[docs] > 0]  # a document without any query term is not found by BM25
            return docs, all_lexical[docs].astype(np.float64), [None] * len(docs), list(all_lexical[docs])
        sides = side_scores(self.lexical, text, depth)  # (s, n): each BM25 granularity the index holds
        proposed = np.union1d(np.asarray(found, dtype=np.int64), np.concatenate([_top(x, depth) for x in sides]))
        sides = side_scores_at(self.lexical, text, sides, proposed)  # an engine's side: exact on every proposal
        dense = self.dense_scores(query, proposed) if whole is None else whole.numpy()[proposed].astype(np.float64)
        fused = fuse(dense, sides[:, proposed].astype(np.float64), self.settings)
        best = np.argsort(-fused, kind="stable")[:k]
        return proposed[best], fused[best], list(dense[best]), list(sides[-1, proposed[best]])

    def dense_scores(self, query: torch.Tensor, docs: np.ndarray) -> np.ndarray:
        """Exact dense scores of documents `docs` (every window, fp32), as float64."""
        return self.windows.document_scores(query, docs, self.scoring).astype(np.float64)

    def _hit(
        self, doc: int, score: float, dense: float | None, lexical: float | None, query: Any, text: str, count: int
    ) -> Hit:
        def clean(value: float | None) -> float | None:
            return None if value is None else float(value)

        found = self._passages(doc, query, text, count) if count else ()
        return Hit(self.windows.doc_ids[doc], float(score), clean(dense), clean(lexical), found)

    def _passages(self, doc: int, query: torch.Tensor | None, text: str, count: int) -> tuple[Passage, ...]:
        """The document's `count` best windows: by their dense cosine with the query, else by the query terms
        they hold (lexical mode)."""
        if self.lexical is None:
            raise SettingError("passages", count, "the index holds no text to cut passages from; build it with text")
        first, last = int(self.windows.offsets[doc]), int(self.windows.offsets[doc + 1])
        body = self.lexical.text(doc)
        spans = [self.lexical.passage(row) for row in range(first, last)]
        if query is not None:
            vectors = torch.as_tensor(np.array(self.windows.vectors[first:last]))  # stored unit
            scores = (vectors @ query).double().numpy()
        else:
            terms = set(self.lexical.query_tokens(text))
            scores = np.asarray([self._term_score(body[s:e], terms) for s, e in spans])
        best = np.argsort(-scores, kind="stable")[:count]
        return tuple(Passage(int(w), spans[w][0], spans[w][1], float(scores[w]), body[spans[w][0] : spans[w][1]])
                     for w in best)  # fmt: skip

    def _term_score(self, window: str, terms: set[int]) -> float:
        """A window's lexical evidence: Σ log(1 + count) over the query's terms it holds."""
        held = self.lexical.query_tokens(window)
        return sum(math.log1p(held.count(t)) for t in terms)

    def exact_ranked(self, query: np.ndarray | None, text: str, k: int, mode: Mode) -> list[tuple[str, float]]:
        """The `k` best (id, score) by an exact scan of every document in `mode` (for checks and benchmarks): every
        document's dense score over all its windows, its BM25 score, or both fused."""
        everything = np.arange(len(self.windows.doc_ids))
        lexical = side_scores(self.lexical, text).astype(np.float64) if mode is not Mode.DENSE else None
        if mode is Mode.LEXICAL:
            assert lexical is not None
            scores = lexical[-1]  # as the lexical search: the window side of both granularities
            ranked = everything[scores > 0]  # as the lexical search: no query term, not found
        else:
            assert query is not None
            unit = torch.nn.functional.normalize(torch.as_tensor(np.asarray(query, dtype=np.float32)), dim=-1)
            dense = self.dense_scores(unit, everything)
            depth = max(self.settings.depth, 10 * k)
            if lexical is not None and self.settings.fusion in CANDIDATE_FUSIONS:  # an engine's side: exact there
                lexical = side_scores_at(self.lexical, text, lexical, exact_candidates(dense, lexical, depth))
            scores = dense if lexical is None else fuse_exact(dense, lexical, self.settings, depth)
            ranked = everything[np.isfinite(scores)]
        best = ranked[np.argsort(-scores[ranked], kind="stable")[:k]]
        return [(self.windows.doc_ids[d], float(scores[d])) for d in best]

    def exact_fused(self, query: torch.Tensor, text: str, k: int) -> list[str]:
        """The fused top-k ids by an exact scan of every document on both sides (for checks and benchmarks)."""
        return [doc for doc, _ in self.exact_ranked(query.numpy(), text, k, Mode.HYBRID)]


def _top(scores: np.ndarray, count: int) -> np.ndarray:
    """The indices of the `count` highest scores, best first (stable)."""
    if count >= len(scores):
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, count)[:count]
    return part[np.argsort(-scores[part], kind="stable")]
