"""The exact scans a search is checked against (`lengthwise eval --index`, the benchmarks, the tests): every document
scored on every window and on every BM25 side, fused by the same rule; and the check that a corpus is the one an index
holds. They read the same store and lexical side as the search, through the same protocols.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from lengthwise.core.corpus import TEXTS, corpus_digests, corpus_file, texts_sha256
from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import Mode
from lengthwise.search.fusion import CANDIDATE_FUSIONS, exact_candidates, fuse_exact

if TYPE_CHECKING:
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.search.protocols import Ranked, WindowStore
    from lengthwise.search.searcher import Searcher
    from lengthwise.search.types import FusionSettings, IndexSettings

__all__ = ["check_corpus", "exact_fused", "exact_ranked", "exact_vectors", "ranked_with_exact"]


def exact_vectors(store: WindowStore, queries: np.ndarray, k: int = 10, *, scoring: WindowScoring | int = 1) -> Ranked:
    """The ranking a store's `search_vectors` approximates, by an exact scan over every window (for checks and
    benchmarks, not for serving)."""
    units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
    scores = store.scan(units, scoring).numpy()
    return [[(store.doc_ids[j], float(row[j])) for j in np.argsort(-row, kind="stable")[:k]] for row in scores]


def exact_ranked(
    searcher: Searcher, query: np.ndarray | None, text: str, k: int, mode: Mode, fusion: FusionSettings
) -> list[tuple[str, float]]:
    """The `k` best (id, score) by an exact scan of every document in `mode` (for checks and benchmarks): every
    document's dense score over all its windows, its BM25 score, or both fused by `fusion`."""
    store, lexical_side = searcher.store, searcher.lexical
    everything = np.arange(len(store.doc_ids))
    lexical = None
    if mode is not Mode.DENSE:
        assert lexical_side is not None  # the mode was checked
        lexical = lexical_side.side_scores(text).astype(np.float64)
    if mode is Mode.LEXICAL:
        assert lexical is not None
        scores = lexical[-1]  # as the lexical search: the window side of both granularities
        ranked = everything[scores > 0]  # as the lexical search: no query term, not found
    else:
        assert query is not None
        unit = torch.nn.functional.normalize(torch.as_tensor(np.asarray(query, dtype=np.float32)), dim=-1)
        dense = searcher.dense_scores(unit, everything)
        depth = max(fusion.depth, 10 * k)
        if lexical is not None and fusion.fusion in CANDIDATE_FUSIONS:  # an engine's side: exact there
            assert lexical_side is not None
            lexical = lexical_side.side_scores_at(text, lexical, exact_candidates(dense, lexical, depth))
        scores = dense if lexical is None else fuse_exact(dense, lexical, fusion, depth)
        ranked = everything[np.isfinite(scores)]
    best = ranked[np.argsort(-scores[ranked], kind="stable")[:k]]
    return [(store.doc_ids[d], float(scores[d])) for d in best]


def exact_fused(searcher: Searcher, query: torch.Tensor, text: str, k: int, fusion: FusionSettings) -> list[str]:
    """The fused top-k ids by an exact scan of every document on both sides (for checks and benchmarks)."""
    return [doc for doc, _ in exact_ranked(searcher, query.numpy(), text, k, Mode.HYBRID, fusion)]


def ranked_with_exact(searcher: Searcher, texts: list[str], k: int, mode: Mode) -> dict[str, Ranked]:
    """(id, score) rankings of the `k` best documents per query: ``index`` through the index in `mode` (as
    `Searcher.search` with generous candidates), ``exact`` by the same mode's exact scan of every document."""
    store, fusion = searcher.store, searcher.fusion
    vectors = None if mode is Mode.LEXICAL else np.asarray(searcher.queries.embed(texts), dtype=np.float32)
    candidates = max(store.default_candidates(), 10 * k)
    if mode is Mode.DENSE:
        assert vectors is not None
        return {"index": store.search_vectors(vectors, k, scoring=searcher.scoring, candidates=candidates),
                "exact": exact_vectors(store, vectors, k, scoring=searcher.scoring)}  # fmt: skip
    found = searcher.rank(vectors, texts, k, mode, fusion, candidates=candidates)
    stage = searcher.tokens if mode is Mode.HYBRID else None
    kept = k if stage is None else max(k, stage.depth)  # the exact hybrid's best, rescored by their tokens below
    exact = [exact_ranked(searcher, None if vectors is None else vectors[n], text, kept, mode, fusion)
             for n, text in enumerate(texts)]  # fmt: skip
    if stage is not None:
        exact = [_rescored_exactly(searcher, row, query, k) for row, query in zip(exact, stage.encode(texts),
                                                                                   strict=True)]  # fmt: skip
    return {"index": [[(hit.id, hit.score) for hit in row] for row in found], "exact": exact}


def _rescored_exactly(searcher: Searcher, row: list[tuple[str, float]], query: np.ndarray, k: int) -> list[
        tuple[str, float]]:  # fmt: skip
    """The exact hybrid ranking `row` (its token stage's depth) rescored by the token stage: what a search with the
    stage returns when its hybrid stage finds the exact hybrid's best documents."""
    assert searcher.tokens is not None
    docs = np.asarray([searcher.numbers[doc] for doc, _ in row], dtype=np.int64)
    found, scores, _ = searcher.tokens.rescore(docs, np.asarray([s for _, s in row], dtype=np.float64), query, k)
    return [(searcher.store.doc_ids[d], float(s)) for d, s in zip(found, scores, strict=True)]


def check_corpus(settings: IndexSettings, doc_ids: list[str], data: str | os.PathLike[str], name: str) -> None:
    """A `SettingError` on ``index`` unless the index `name` (its `settings` and `doc_ids`) holds exactly the
    documents of the corpus at `data` (a corpus file or a BEIR folder): the same ids, and the same texts by the digest
    `lengthwise encode` recorded (the same ids with other texts would score as if they were it). The one check of a
    corpus scored through an index (`lengthwise eval --index`, `lengthwise index tune`)."""
    recorded = settings["encode_settings"].get(TEXTS)
    if recorded is None:
        raise SettingError("index", name, "records no digest of the texts it holds (built by an older "
                           f"lengthwise, or from an unfinished encode), so it cannot be checked against {data}; "
                           "encode the corpus and build the index again")  # fmt: skip
    digests = corpus_digests(corpus_file(Path(data)))
    missing, extra = len(set(doc_ids) - digests.keys()), len(digests.keys() - set(doc_ids))
    if missing or extra:
        raise SettingError("index", name, f"holds {len(doc_ids)} documents and {data} {len(digests)}: "
                           f"{missing} indexed are not in {data}, {extra} of {data} are not indexed; build the "
                           "index from this corpus")  # fmt: skip
    if texts_sha256(digests) != recorded:
        raise SettingError("index", name, f"holds the ids of {data} with other texts (it was built from another "
                           "version of the corpus); build the index from this corpus")  # fmt: skip
