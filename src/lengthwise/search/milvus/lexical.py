"""The lexical side of an index served from Milvus: `EngineLexical`, a `LexicalSide` over the engine's BM25 rows.

The local index's own BM25 (bm25s) is loaded at each granularity it holds: each window's (or document's) row of its
precomputed score matrix is that row's sparse vector, and a query's sparse vector holds its terms (tokenized by that
side's recorded vocabulary) with their counts, so the engine's inner product is bm25s's score of the window or
document (up to float32 summation order). The engine's own BM25 function (its analyzer, its IDF) would score
differently. A query reads at most `BM25_LIMIT` rows of a side back (Milvus's largest limit); a hybrid search asks
again, among their own rows, for the proposed documents such a cut search read as 0 (`EngineLexical.side_scores_at`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lengthwise.core.errors import LongDocError, SettingError
from lengthwise.search.lexical.bm25s_calls import Bm25Tokenizer
from lengthwise.search.milvus.client import MilvusClient, Record
from lengthwise.search.milvus.store import (
    DOCUMENTS,
    RECORDS,
    SEARCH_LIMIT,
    TEXT,
    ensure_loaded,
    hit_arrays,
    read_records,
)
from lengthwise.search.rows import documents_of, window_rows
from lengthwise.search.types import LexicalSettings

__all__ = ["EngineBM25", "EngineLexical", "engine_sides"]

BM25_LIMIT = SEARCH_LIMIT  # rows a BM25 side's search returns (a test lowers it)
ROWS_PER_PROPOSAL = 20  # window rows a BM25 side first asks for per document it must propose (`EngineBM25.searched`)
CUTS_KEPT = 1_024  # queries whose cut sides an open index remembers (`EngineLexical.cut`)
TEXTS_KEPT = 1_024  # documents' texts an open index keeps read (passages of the hits at hand)


@dataclass
class EngineBM25:
    """BM25 at one granularity in the engine: the recorded tokenizer here, the rows' weights there (one row per window,
    each scoring its document by the best, or one per document, `whole`). A search asks for the rows' ids alone: a
    window's document is found from its row number (`offsets`). Asked for no field, the engine sends every one back
    (each row's sparse weights: at 1M windows a search of 16,384 rows took 14 s that way, 1.7 s with the ids)."""

    client: MilvusClient
    collection: str
    tokenizer: Bm25Tokenizer
    offsets: np.ndarray  # (n + 1,) each document's first window row
    whole: bool  # rows are documents (the whole-document side), not windows

    def query_tokens(self, query: str) -> list[int]:
        """The query's terms known to this side's corpus (as `LexicalIndex.query_tokens`)."""
        ids = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        empty = self.tokenizer.get_vocab_dict().get("")
        return [int(i) for i in ids if i != empty]

    def scores(self, query: str) -> np.ndarray:
        """Each document's BM25 score (its best window's on the window side; 0: no query term), summed by the
        engine: exact for the documents of its best `BM25_LIMIT` rows (`searched`)."""
        return self.searched(query)[0]

    def searched(self, query: str, wanted: int | None = None) -> tuple[np.ndarray, bool]:
        """`scores`, and whether the engine's search was cut (more rows hold a query term than came back): then a
        document none of whose rows came back reads 0 whatever its score (`scores_among` scores it). With `wanted`
        (a hybrid search's depth), only the `wanted` best documents must be right: the search first asks for one row
        more than that on the whole-document side (the last row must score below the `wanted`-th: `_decided`),
        `ROWS_PER_PROPOSAL` times as many (and one) on the window side, and asks again for `BM25_LIMIT` rows only
        where those do not decide the `wanted` best. The rows come best first and each document scores by its best,
        so every document among them has its exact score and none outside scores more: at 1M windows a window
        search of 16,384 rows took about 37 ms, one of 2,000 about 9 (docs/engines.md, "How it searches")."""
        best = np.zeros(len(self.offsets) - 1, dtype=np.float32)
        weights = self._weights(query)
        if not weights:
            return best, False
        limit = BM25_LIMIT if wanted is None else min(BM25_LIMIT, 1 + wanted * (1 if self.whole else ROWS_PER_PROPOSAL))
        owners, scores = self._search(weights, limit)
        if wanted is not None and limit < BM25_LIMIT and not _decided(owners, scores, limit, wanted):
            limit = BM25_LIMIT
            owners, scores = self._search(weights, limit)
        np.maximum.at(best, owners, scores)
        return best, len(owners) >= limit

    def _search(
        self, weights: dict[int, float], limit: int, among: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(documents, scores) of the best `limit` rows for the query `weights` (sparse inner product; among the rows
        numbered `among` alone where given), best first; the rows' ids alone come back, a window's document is found
        from its row number."""
        among_rows = {} if among is None else {"filter": f"id in {among.tolist()}"}
        found = self.client.search(self.collection, [weights], anns_field="bm25", limit=limit, **among_rows,
                                   search_params={"metric_type": "IP"}, output_fields=["id"])[0]  # fmt: skip
        ids, scores = hit_arrays(found)
        owners = ids if self.whole else documents_of(self.offsets, ids)
        return owners, scores

    def scores_among(self, query: str, docs: np.ndarray) -> np.ndarray:
        """The exact scores of the sorted documents `docs`: the engine searches only their own rows, read by primary
        key (``id in [...]``), `BM25_LIMIT` rows a search."""
        best = np.zeros(len(docs), dtype=np.float32)
        weights = self._weights(query)
        if not weights or not len(docs):
            return best
        rows = docs if self.whole else window_rows(self.offsets, docs)
        for first in range(0, len(rows), BM25_LIMIT):
            part = rows[first : first + BM25_LIMIT]
            owners, scores = self._search(weights, len(part), part)
            np.maximum.at(best, np.searchsorted(docs, owners), scores)
        return best

    def _weights(self, query: str) -> dict[int, float]:
        """The query's sparse vector: each known term with its count (empty: no term the corpus holds)."""
        terms = self.query_tokens(query)
        return {int(t): float(c) for t, c in zip(*np.unique(terms, return_counts=True), strict=True)} if terms else {}


@dataclass
class EngineLexical:
    """The lexical side in the engine: its BM25 sides (`EngineBM25`; whole documents, then windows, as
    `BothGranularities.side_scores` orders them) and the documents' texts and spans (passages), read from the
    records."""

    client: MilvusClient
    collection: str
    settings: LexicalSettings
    sides: list[EngineBM25]
    offsets: np.ndarray  # (n + 1,) each document's first window row
    read: dict[int, Record] = field(default_factory=dict)  # documents' texts and spans read (passages)
    cut: dict[str, tuple[bool, ...]] = field(default_factory=dict)  # per query: which sides' searches were cut

    def query_tokens(self, query: str) -> list[int]:
        """The query's terms known to the corpus (as `LexicalIndex.query_tokens`; the window side's when both)."""
        return self.sides[-1].query_tokens(query)

    def scores(self, query: str) -> np.ndarray:
        """Each document's BM25 score as a lexical search ranks it (the window side's when both)."""
        return self.sides[-1].scores(query)

    def side_scores(self, query: str, depth: int | None = None) -> np.ndarray:
        """(s, n): each BM25 side's score of every document (whole documents, then best windows, when both), right
        for each side's `depth` best where given (`EngineBM25.searched`); a side whose search was cut is noted for
        `side_scores_at` (the last `CUTS_KEPT` queries)."""
        searched = [side.searched(query, depth) for side in self.sides]
        if len(self.cut) >= CUTS_KEPT:
            self.cut.clear()
        self.cut[query] = tuple(cut for _, cut in searched)
        return np.stack([scores for scores, _ in searched])

    def side_scores_at(self, query: str, sides: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """`sides` (`side_scores` of `query`) with the documents numbered `docs` exact on every side: where a side's
        search was cut at `BM25_LIMIT` rows, those of `docs` that read 0 there are searched again among their own
        rows (`EngineBM25.scores_among`). Without it a hybrid query fused such a document on a 0: at 1M windows its
        top 10 matched the local index's for 0.3 of the queries (docs/benchmarks.md)."""
        cuts = self.cut.get(query, (True,) * len(self.sides))
        asked, out = np.unique(np.asarray(docs, dtype=np.int64)), sides
        for n, (side, cut) in enumerate(zip(self.sides, cuts, strict=True)):
            unknown = asked[out[n, asked] == 0] if cut else asked[:0]
            if len(unknown):
                out = out.copy() if out is sides else out
                out[n, unknown] = side.scores_among(query, unknown)
        return out

    def _document(self, doc: int) -> Record:
        """Document `doc`'s text and its windows' spans, read from the records (the last `TEXTS_KEPT` kept)."""
        if doc not in self.read:
            found = read_records(self.client, self.collection + RECORDS, [f"{TEXT}{doc}"]).get(f"{TEXT}{doc}")
            if found is None:
                raise SettingError("passages", doc, "this load holds no text of the documents (made by an earlier "
                                   "lengthwise); load the index again, or search without passages")  # fmt: skip
            if len(self.read) >= TEXTS_KEPT:
                self.read.clear()
            self.read[doc] = found
        return self.read[doc]

    def text(self, doc: int) -> str:
        """Document number `doc`'s text (as `LexicalIndex.text`)."""
        return str(self._document(doc)["text"])

    def passage(self, row: int) -> tuple[int, int]:
        """The character span of window row `row` (as `LexicalIndex.passage`)."""
        doc = int(np.searchsorted(self.offsets, row, side="right")) - 1
        start, end = self._document(doc)["spans"][row - int(self.offsets[doc])]
        return int(start), int(end)

    def passages(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 2) int64: the character spans of window `rows` of one document, from its record read once."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(rows):
            return np.empty((0, 2), dtype=np.int64)
        doc = int(np.searchsorted(self.offsets, rows[0], side="right")) - 1
        spans = np.asarray(self._document(doc)["spans"], dtype=np.int64).reshape(-1, 2)
        return spans[rows - int(self.offsets[doc])]


def engine_sides(client: MilvusClient, collection: str, found: dict[str, Any], served: str) -> list[EngineBM25]:
    """The BM25 sides a load recorded (`found`: its records), whole documents first, each with its tokenizer.

    Raises:
        LongDocError: The records say whole-document BM25 and its collection or vocabulary is not there (a load
            that did not finish it, or a collection dropped by hand): searched without it, hybrid scores would
            differ from the local index's, so `served` is refused with the fix.
    """
    granularity = found["lexical"]["settings"].get("granularity", "window")
    offsets, whole = np.asarray(found["offsets"], dtype=np.int64), collection + DOCUMENTS
    tokenizer = _recorded_tokenizer(found["lexical"])
    if granularity == "window":
        return [EngineBM25(client, collection, tokenizer, offsets, whole=False)]
    vocabulary = found.get("lexical_document") if granularity == "both" else found["lexical"]
    if vocabulary is None or not client.has_collection(whole):
        raise LongDocError(None, None, f"{served} holds BM25 at granularity {granularity} without its whole-document "
                           "side; load it again with lengthwise index build --backend milvus")  # fmt: skip
    ensure_loaded(client, whole)
    document = EngineBM25(client, whole, _recorded_tokenizer({**found["lexical"], **vocabulary}), offsets,
                           whole=True)  # fmt: skip
    return [document] if granularity == "document" else [document, EngineBM25(client, collection, tokenizer,
                                                                                offsets, whole=False)]  # fmt: skip


def _decided(owners: np.ndarray, scores: np.ndarray, limit: int, wanted: int) -> bool:
    """Whether a BM25 side's best `limit` rows (their documents `owners`, their `scores`, best first) decide its
    `wanted` best documents: fewer came back (every matching row is there), or at least `wanted` documents did and
    the `wanted`-th best scores above the last row. A tie there could continue past the rows returned, and the local
    index breaks ties by document number, which the engine's order need not follow (corpora with repeated text:
    boilerplate, filler)."""
    if len(owners) < limit:
        return True
    docs, inverse = np.unique(owners, return_inverse=True)
    best = np.full(len(docs), -np.inf, dtype=np.float32)
    np.maximum.at(best, inverse, scores)
    ranked = np.sort(best)[::-1]
    return len(docs) >= wanted and bool(ranked[wanted - 1] > scores.min())


def _recorded_tokenizer(recorded: dict[str, Any]) -> Bm25Tokenizer:
    """bm25s's tokenizer with the vocabulary recorded at load (as `LexicalIndex.open` reads it from its folder)."""
    from lengthwise.search.lexical.bm25 import _tokenizer

    tokenizer = _tokenizer(recorded["settings"]["language"])
    tokenizer.word_to_stem = recorded["word_to_stem"]
    tokenizer.stem_to_sid = recorded["stem_to_sid"]
    tokenizer.word_to_id = recorded["word_to_id"]
    return tokenizer
