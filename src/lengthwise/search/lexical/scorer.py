"""BM25 scores of any text against one corpus's statistics: the lexical side of the retrieval length-bias audit.

`lengthwise audit --retrieval DIR --retrieval-search lexical,hybrid` audits BM25 the way it audits an encoder:
perturbed copies of a relevant document (diluted, repeated, moved in filler) are scored as if they stood in the
corpus in place of the original, and ranked against the corpus. `BM25Scorer` indexes the corpus with bm25s (the
engine of the hybrid index, same tokenizer, stemmer, stop words and Lucene BM25) and scores a text that is not in the
corpus with the same formula and the corpus's own statistics (document frequencies, number of documents, mean
length): a single document swapped in would move those by at most one document in N. bm25s scores only the
documents it indexed, so that one formula is written here; `tests/test_retrieval_search.py` checks it against
bm25s on the corpus's own documents.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lengthwise.search.lexical.bm25 import K1, LANGUAGE, LANGUAGES, B, _tokenizer, require_bm25s

__all__ = ["BM25Scorer"]


class BM25Scorer:
    """Lucene BM25 (bm25s) over `corpus`, able to score texts outside it (`text_scores`).

    Args:
        corpus: The documents' texts, in the corpus's order.
        language: The stemmer and stop words (``english``).
        k1, b: BM25's term-frequency saturation and length normalisation (Lucene's defaults in bm25s).
    """

    def __init__(self, corpus: Sequence[str], *, language: str = LANGUAGE, k1: float = K1, b: float = B) -> None:
        bm25s = require_bm25s()
        self.tokenizer = _tokenizer(language)
        ids = self.tokenizer.tokenize(list(corpus), update_vocab=True, return_as="ids", show_progress=False)
        self.vocabulary = len(self.tokenizer.get_vocab_dict())  # ids ≥ this appear only in texts scored later
        self.empty = self.tokenizer.get_vocab_dict().get("")  # bm25s's placeholder for a text with no term
        self.retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
        self.retriever.index((ids, self.tokenizer.get_vocab_dict()), show_progress=False)
        df = np.diff(self.retriever.scores["indptr"]).astype(np.float64)  # documents per term: its column's entries
        n = len(ids)
        self.idf = np.log1p((n - df + 0.5) / (df + 0.5))  # Lucene's idf (bm25s `_score_idf_lucene`)
        self.mean_length = float(np.mean([len(doc) for doc in ids])) if ids else 1.0
        self.k1, self.b, self.language, self.documents = k1, b, language, n

    def describe(self) -> dict[str, object]:
        """What ranks, for the record."""
        return {"engine": "bm25s", "method": "lucene", "granularity": "document", "language": self.language,
                "stop_words": LANGUAGES[self.language], "k1": self.k1, "b": self.b}  # fmt: skip

    def query_terms(self, query: str) -> list[int]:
        """The query's terms known to the corpus (stop words, unknown words and the empty placeholder dropped)."""
        ids = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        return [int(i) for i in ids if i != self.empty and i < self.vocabulary]

    def corpus_scores(self, query: str) -> np.ndarray:
        """BM25 of every corpus document for `query`: (N,) float64, zeros for a query with no known term."""
        terms = self.query_terms(query)
        if not terms:
            return np.zeros(self.documents)
        return np.asarray(self.retriever.get_scores(terms), dtype=np.float64)

    def text_scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """BM25 of each of `texts` for `query`, each scored as one more corpus document with the corpus's
        statistics: (T,) float64. A word the corpus never holds counts toward a text's length only."""
        terms = np.asarray(self.query_terms(query), dtype=np.int64)
        out = np.zeros(len(texts))
        if not len(terms) or not texts:
            return out
        ids = self.tokenizer.tokenize(list(texts), update_vocab=True, return_as="ids", show_progress=False)
        for row, tokens in enumerate(ids):
            doc = np.asarray(tokens, dtype=np.int64)
            tf = (doc[None, :] == terms[:, None]).sum(axis=1).astype(np.float64)  # per query term (repeats kept)
            norm = self.k1 * (1 - self.b + self.b * len(doc) / self.mean_length)
            out[row] = float(np.sum(self.idf[terms] * tf / (tf + norm)))
        return out
