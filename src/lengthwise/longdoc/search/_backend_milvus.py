"""The window index on Milvus: embedded (Milvus Lite, a folder) for one user, a Milvus server or cluster (a URL) for
many, through the same pymilvus code (docs/engines.md says why Milvus and what was measured).

The engine holds what a query needs: one row per window (its row number, its document number, its fp32 vector, and
its BM25 term weights as a sparse vector), one row per document with its whole-document BM25 term weights (a third
collection, when the local index holds BM25 at granularity ``both`` or ``document``), and a second collection of
records: the index settings, the document ids, each document's first window, each BM25 side's tokenizer vocabulary
and the lexical settings, and each document's text with its windows' character spans (a hit's passages, as the local
index cuts them). The engine proposes,
lengthwise scores, as `lengthwise.longdoc.search.index.LongIndex` does with USearch or FAISS: the engine's nearest
windows rank their documents, the best documents are read back whole (every window's vector) and scored exactly
with `lengthwise.core.encoder.multi_vector_scores`, and a hybrid query is fused by the same
`lengthwise.longdoc.search.hybrid.HybridSearch`. A document therefore gets the score it gets from the local index.

The lexical side is the local index's own BM25 (bm25s), at each granularity it holds: each window's (or document's)
row of its precomputed score matrix is that window's (document's) sparse vector, and a query's sparse vector holds
its terms (tokenized by that side's recorded vocabulary) with their counts, so the engine's inner product is bm25s's
score of the window or document (up to float32 summation order). A hybrid query fuses the dense side with both BM25
sides, as the local `lengthwise.longdoc.search.lexical.BothGranularities` does. The engine's own BM25 function (its
analyzer, its IDF) would score differently, which would break the equivalence. A lexical query reads at most
`SEARCH_LIMIT` rows of a side back (Milvus's largest limit): exact whenever fewer windows (documents) hold one of
its terms; beyond that, documents whose only matching rows fall past the limit score 0 on that side.

A load is `lengthwise.longdoc.search._milvus_load`'s; the connection and the records collection are
`lengthwise.longdoc.search._milvus_store`'s.

Example (an index loaded before, by `load_into_milvus` or ``lengthwise index build --backend milvus``):
    >>> engine = MilvusIndex.open("out/milvus.db", "scifact")       # doctest: +SKIP
    >>> hits = engine.search(["who wrote the report?"], k=10, mode="hybrid")  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.core.errors import SettingError
from lengthwise.core.parallel import each, search_pool
from lengthwise.core.scoring import WindowScoring
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.search._document_search import RESCORED, RESCORED_AT_LEAST, DocumentSearch
from lengthwise.longdoc.search._milvus_store import (
    DOCUMENTS,
    LISTS,
    READ_ROWS,
    RECORDS,
    TEXT,
    check_name,
    connect,
    engine_kind,
    ensure_loaded,
    read_records,
    served_collection,
)

__all__ = ["MilvusIndex"]

SEARCH_LIMIT = 16_384  # Milvus's largest `limit` of one search
BM25_LIMIT = SEARCH_LIMIT  # rows a BM25 side's search returns (a test lowers it)
ROWS_PER_PROPOSAL = 20  # window rows a BM25 side first asks for per document it must propose (`_EngineBM25.searched`)
CUTS_KEPT = 1_024  # queries whose cut sides an open index remembers (`_EngineLexical.cut`)
ROWS_BY_DOCUMENT = {"lite": 128, "server": 0}  # by engine: a filter keeping over 1/N of the rows names documents, not
# rows (`_rows_filter`; 0: always documents)
CANDIDATES = 1_000  # candidate windows per dense query, as the local index's int8 default
TEXTS_KEPT = 1_024  # documents' texts an open index keeps read (passages of the hits at hand)


@dataclass
class _EngineBM25:
    """BM25 at one granularity in the engine: the recorded tokenizer here, the rows' weights there (one row per window,
    each scoring its document by the best, or one per document, `whole`). A search asks for the rows' ids alone: a
    window's document is found from its row number (`offsets`). Asked for no field, the engine sends every one back
    (each row's sparse weights: at 1M windows a search of 16,384 rows took 14 s that way, 1.7 s with the ids)."""

    client: Any
    collection: str
    tokenizer: Any
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

    def _search(self, weights: dict[int, float], limit: int, among: np.ndarray | None = None) -> tuple[Any, Any]:
        """(documents, scores) of the best `limit` rows for the query `weights` (sparse inner product; among the rows
        numbered `among` alone where given), best first; the rows' ids alone come back, a window's document is found
        from its row number."""
        among_rows = {} if among is None else {"filter": f"id in {among.tolist()}"}
        found = self.client.search(self.collection, [weights], anns_field="bm25", limit=limit, **among_rows,
                                   search_params={"metric_type": "IP"}, output_fields=["id"])[0]  # fmt: skip
        ids, scores = _hit_arrays(found)
        owners = ids if self.whole else _documents_of(self.offsets, ids)
        return owners, scores

    def scores_among(self, query: str, docs: np.ndarray) -> np.ndarray:
        """The exact scores of the sorted documents `docs`: the engine searches only their own rows, read by primary
        key (``id in [...]``), `BM25_LIMIT` rows a search."""
        best = np.zeros(len(docs), dtype=np.float32)
        weights = self._weights(query)
        if not weights or not len(docs):
            return best
        rows = docs if self.whole else _window_rows(self.offsets, docs)
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
class _EngineLexical:
    """The lexical side in the engine: its BM25 sides (`_EngineBM25`; whole documents, then windows, as
    `BothGranularities.side_scores` orders them) and the documents' texts and spans (passages), read from the
    records."""

    client: Any
    collection: str
    settings: dict[str, Any]
    sides: list[_EngineBM25]
    offsets: np.ndarray  # (n + 1,) each document's first window row
    read: dict[int, dict[str, Any]] = field(default_factory=dict)  # documents' texts and spans read (passages)
    cut: dict[str, tuple[bool, ...]] = field(default_factory=dict)  # per query: which sides' searches were cut

    def query_tokens(self, query: str) -> list[int]:
        """The query's terms known to the corpus (as `LexicalIndex.query_tokens`; the window side's when both)."""
        return self.sides[-1].query_tokens(query)

    def scores(self, query: str) -> np.ndarray:
        """Each document's BM25 score as a lexical search ranks it (the window side's when both)."""
        return self.sides[-1].scores(query)

    def side_scores(self, query: str, depth: int | None = None) -> np.ndarray:
        """(s, n): each BM25 side's score of every document (whole documents, then best windows, when both), right
        for each side's `depth` best where given (`_EngineBM25.searched`); a side whose search was cut is noted for
        `side_scores_at` (the last `CUTS_KEPT` queries)."""
        searched = [side.searched(query, depth) for side in self.sides]
        if len(self.cut) >= CUTS_KEPT:
            self.cut.clear()
        self.cut[query] = tuple(cut for _, cut in searched)
        return np.stack([scores for scores, _ in searched])

    def side_scores_at(self, query: str, sides: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """`sides` (`side_scores` of `query`) with the documents numbered `docs` exact on every side: where a side's
        search was cut at `BM25_LIMIT` rows, those of `docs` that read 0 there are searched again among their own
        rows (`_EngineBM25.scores_among`). Without it a hybrid query fused such a document on a 0: at 1M windows its
        top 10 matched the local index's for 0.3 of the queries (docs/benchmarks.md)."""
        cuts = self.cut.get(query, (True,) * len(self.sides))
        asked, out = np.unique(np.asarray(docs, dtype=np.int64)), sides
        for n, (side, cut) in enumerate(zip(self.sides, cuts, strict=True)):
            unknown = asked[out[n, asked] == 0] if cut else asked[:0]
            if len(unknown):
                out = out.copy() if out is sides else out
                out[n, unknown] = side.scores_among(query, unknown)
        return out

    def _document(self, doc: int) -> dict[str, Any]:
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


def _engine_sides(client: Any, collection: str, found: dict[str, Any], served: str) -> list[_EngineBM25]:
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
        return [_EngineBM25(client, collection, tokenizer, offsets, whole=False)]
    vocabulary = found.get("lexical_document") if granularity == "both" else found["lexical"]
    if vocabulary is None or not client.has_collection(whole):
        raise LongDocError(None, None, f"{served} holds BM25 at granularity {granularity} without its whole-document "
                           "side; load it again with lengthwise index build --backend milvus")  # fmt: skip
    ensure_loaded(client, whole)
    document = _EngineBM25(client, whole, _recorded_tokenizer({**found["lexical"], **vocabulary}), offsets,
                           whole=True)  # fmt: skip
    return [document] if granularity == "document" else [document, _EngineBM25(client, collection, tokenizer,
                                                                                offsets, whole=False)]  # fmt: skip


@dataclass(eq=False)
class MilvusIndex(DocumentSearch):
    """A window index served from Milvus, searched as `LongIndex` is (`search`, `search_vectors`, `proposals`,
    `document_scores`): the same document scores. Load one with `load_into_milvus`, open it with `open`."""

    client: Any
    uri: str
    collection: str  # the windows collection the served name named when opened
    settings: dict[str, Any]
    doc_ids: list[str]
    offsets: np.ndarray  # (n + 1,)
    lexical: _EngineLexical | None = None
    model: Any = None
    load_model: Any = field(default=None)
    kind: str = "server"  # the engine (`engine_kind`): how many rows a read asks for, and who scores a document

    @classmethod
    def open(cls, uri: str, name: str = "lengthwise", *, load_model: Any = None) -> MilvusIndex:
        """Open the index served as `name` at `uri`.

        Raises:
            LongDocError: Nothing complete is served under `name` there (the message names the URI and the fix).
        """
        client = connect(uri)
        collection = served_collection(client, check_name(name))
        if collection is None:
            raise LongDocError(None, None, f"{uri}: no index is served as {name!r}; load one with "
                               "lengthwise index build --backend milvus")  # fmt: skip
        ensure_loaded(client, collection, collection + RECORDS)
        keys = ["settings", "doc_ids", "offsets", "lexical", "lexical_document"]
        found = read_records(client, collection + RECORDS, keys)
        offsets = np.asarray(found["offsets"], dtype=np.int64)
        lexical = None
        if "lexical" in found:
            sides = _engine_sides(client, collection, found, f"{uri}: the index served as {name!r}")
            lexical = _EngineLexical(client, collection, found["lexical"]["settings"], sides, offsets)
        return cls(client, uri, collection, found["settings"], found["doc_ids"], offsets, lexical, None, load_model,
                   engine_kind(uri))  # fmt: skip

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, {self.collection!r})"

    def _without_text(self) -> str:
        return (f"{self.uri} holds no BM25 weights (loaded from an index built without text); load it from one built "
                "with the corpus, or search dense")  # fmt: skip

    def _windows(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, documents, vectors) of every window of the sorted documents `docs`, by row. A document's windows
        are the rows ``offsets[d]:offsets[d + 1]``, so they are read by primary key (``id in [...]``), `read_rows`
        rows a query (each query is a round trip): a filter on the document field, or on row ranges, makes Milvus
        Lite 3.x scan the collection (a dense query at 1M windows took 4.8 s that way, 1.1 s by primary key:
        docs/benchmarks.md, "At 1M windows")."""
        rows, step = _window_rows(self.offsets, docs), self.read_rows
        found = [self._read(rows[first : first + step]) for first in range(0, len(rows), step)]
        found = [(ids, vectors) for ids, vectors in found if len(ids)] or [
            (np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
        ]
        rows, vectors = np.concatenate([ids for ids, _ in found]), np.concatenate([v for _, v in found])
        order = np.argsort(rows, kind="stable")
        rows = rows[order]
        return rows, _documents_of(self.offsets, rows), vectors[order]

    @property
    def read_rows(self) -> int:
        """Rows one read by primary key asks for (`READ_ROWS`, by the engine)."""
        return READ_ROWS[self.kind]

    def _similarities(
        self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents, similarities as a column) of every window of the sorted documents `docs`: the engine's inner
        products with `query`, from dense searches among those windows alone (a filter on their row numbers, at most
        `SEARCH_LIMIT` rows a search). None where a search did not send every one of them back (a filtered search
        that is approximate, or a document of more windows than one search returns): then the windows are read back
        (`_windows`), as they are where the scoring fuses a mean of windows, and on Milvus Lite 3.x (its filtered
        search is approximate).

        Every window is asked for, not each document's best alone (a search grouped by document): a grouped search
        sends back one window a document whether or not it compared them all, so an approximate one lowers a score
        unseen. Milvus Lite 2.5.1 searches a filter that keeps many rows through its own IVF index (whatever
        ``nprobe`` is asked for): grouped by document at 100,000 real windows, 250 of 5,000 documents (ten queries)
        came back below their best window where the filter kept a tenth of the rows, none where it kept a
        hundredth; asked for every window, all came back (`benchmarks/bench_milvus_exactness.py`)."""
        if scoring.fuse_mean or self.kind == "lite-python":
            return None
        counts = self.offsets[docs + 1] - self.offsets[docs]
        if not len(docs) or counts.max() > SEARCH_LIMIT:
            return None
        starts, total = [0], 0
        for n, count in enumerate(counts.tolist()):
            if total + count > SEARCH_LIMIT:
                starts.append(n)
                total = 0
            total += count
        parts = []
        for first, last in zip(starts, [*starts[1:], len(docs)], strict=True):
            rows = _window_rows(self.offsets, docs[first:last])
            every = {"metric_type": "IP", "params": {"ef": len(rows), "nprobe": LISTS}}
            found = self.client.search(self.collection, [query.tolist()], anns_field="dense", limit=len(rows),
                                       filter=_rows_filter(rows, docs[first:last], int(self.offsets[-1]),
                                                           ROWS_BY_DOCUMENT.get(self.kind, 0)),
                                       output_fields=["id"], search_params=every)[0]  # fmt: skip
            if len(found) != len(rows):
                return None
            parts.append(self._hits(found))
        return np.concatenate([o for o, _ in parts]), np.concatenate([x for _, x in parts])[:, None]

    def _read(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, vectors) of the windows numbered `rows`, in the engine's order. The vectors come back as one
        float32 array (``strict_float32``: each row a view of it, not a list of Python floats), and a window's
        document is found from its row number (`offsets`), not read: less Python per row (docs/benchmarks.md, the
        read path before and after)."""
        found = self.client.query(self.collection, filter=f"id in {rows.tolist()}", output_fields=["id", "dense"],
                                  limit=len(rows), strict_float32=True)  # fmt: skip
        ids = np.fromiter((row["id"] for row in found), dtype=np.int64, count=len(found))
        vectors = np.stack([row["dense"] for row in found]) if len(found) else np.zeros((0, 0), dtype=np.float32)
        return ids, vectors.astype(np.float32, copy=False)

    def document_scores(self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring | int) -> np.ndarray:
        """Exact fp32 scores of the documents numbered `docs` for one unit `query`, over every window of each (read
        back from the engine)."""
        if not len(docs):
            return np.zeros(0, dtype=np.float32)
        if len(docs) == len(self.doc_ids) and np.array_equal(docs, np.arange(len(docs))):  # every document
            return multi_vector_scores(query[None], self._every_window(), scoring, unit=True)[0].numpy()
        ordered, back = np.unique(np.asarray(docs, dtype=np.int64), return_inverse=True)
        scoring = WindowScoring.of(scoring)
        scored = self._similarities(query, ordered, scoring)
        if scored is not None:  # the engine's similarities, scored as one-wide windows against a query of 1
            return _grouped_scores(torch.ones(1), ordered, scored[0], scored[1], scoring)[back]
        _, owners, vectors = self._windows(ordered)
        return _grouped_scores(query, ordered, owners, vectors, scoring)[back]

    @property
    def vectors(self) -> _EngineVectors:
        """The window vectors by row, read from the engine when sliced (``vectors[first:last]``: a hit's passages)."""
        return _EngineVectors(self)

    def _every_window(self) -> MultiVectors:
        """Every window's vector, read from the engine once and kept (exact scans: evaluation, not serving)."""
        if "_every" not in self.__dict__:
            every = np.arange(len(self.doc_ids))
            self.__dict__["_every"] = MultiVectors(self._windows(every)[2], self.offsets)
        return self.__dict__["_every"]

    def default_candidates(self) -> int:
        """Candidate windows per dense query when none are asked for (`CANDIDATES`)."""
        return CANDIDATES

    def _scan(self, units: torch.Tensor, scoring: WindowScoring | int) -> torch.Tensor:
        """(Q, n) exact scores of every document, every window read back from the engine (for checks and
        evaluation, not for serving). The lexical side's exact scan is the engine's sparse search (exact up to
        `SEARCH_LIMIT` matching windows)."""
        return multi_vector_scores(units, self._every_window(), scoring, unit=True)

    def _candidates(
        self, units: torch.Tensor, candidates: int, probes: int, scoring: WindowScoring
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per query, (documents, windows) of its `candidates` nearest windows in the engine: each window's document
        from its row number (`offsets`), the windows as the engine's similarities (a column) where `scoring` needs
        nothing else, as their vectors only where it fuses a mean of windows (`_proposed`). At 1M windows, 1,000
        vectors sent back cost a dense query a fifth of its time (docs/benchmarks.md, "At 1M windows")."""
        limit = max(1, min(candidates, SEARCH_LIMIT, int(self.offsets[-1])))
        params = {"ef": max(probes, limit), "nprobe": probes}  # HNSW reads one, IVF_FLAT the other (`dense_index`)
        found = self.client.search(self.collection, units.numpy().tolist(), anns_field="dense", limit=limit,
                                   search_params={"metric_type": "IP", "params": params},
                                   output_fields=["dense"] if scoring.fuse_mean else ["id"])  # fmt: skip
        out = []
        for hits in found:
            owners, similarities = self._hits(hits)
            windows = (
                np.asarray([h["entity"]["dense"] for h in hits], dtype=np.float32)
                if scoring.fuse_mean
                else similarities[:, None]
            )
            out.append((owners, windows))
        return out

    def _hits(self, hits: Any) -> tuple[np.ndarray, np.ndarray]:
        """(documents, similarities) of a dense search's hits, in its order: a window's document from its row
        number (`offsets`)."""
        rows, similarities = _hit_arrays(hits)
        return _documents_of(self.offsets, rows), similarities

    def _proposed(
        self, query: torch.Tensor, found: tuple[np.ndarray, np.ndarray], scoring: WindowScoring
    ) -> np.ndarray:
        """The candidate documents, best first, each scored on its candidate windows (`_candidates`: their vectors,
        or their similarities as one-wide vectors scored against a query of 1)."""
        owners, windows = found
        if not len(owners):
            return np.zeros(0, dtype=np.int64)
        docs = np.unique(owners)
        query = query if scoring.fuse_mean else torch.ones(1)
        return docs[np.argsort(-_grouped_scores(query, docs, owners, windows, scoring), kind="stable")]

    def search_vectors(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        scoring: WindowScoring | int = 1,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> list[list[tuple[str, float]]]:
        """The `k` best documents per query row, as `LongIndex.search_vectors`: the engine's nearest windows rank
        their documents, the best ``max(10·k, 100)`` are scored exactly on all their windows."""
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        scoring = WindowScoring.of(scoring)
        found = self._candidates(units, candidates or CANDIDATES, probes or 64, scoring)

        def rescored(pair: tuple[torch.Tensor, Any]) -> list[tuple[str, float]]:
            docs = np.sort(self._proposed(pair[0], pair[1], scoring)[: max(RESCORED * k, RESCORED_AT_LEAST)])
            scores = self.document_scores(pair[0], docs, scoring)
            return [(self.doc_ids[docs[j]], float(scores[j])) for j in np.argsort(-scores, kind="stable")[:k]]

        return each(search_pool(search_threads, len(found)), rescored, zip(units, found, strict=True))

    def proposals(
        self,
        queries: np.ndarray,
        count: int,
        *,
        scoring: WindowScoring | int = 1,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> list[np.ndarray]:
        """Per query row, the numbers of its `count` best candidate documents (as `LongIndex.proposals`)."""
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        scoring = WindowScoring.of(scoring)
        found = self._candidates(units, candidates or CANDIDATES, probes or 64, scoring)
        pairs = zip(units, found, strict=True)
        return each(search_pool(search_threads, len(found)), lambda p: self._proposed(p[0], p[1], scoring)[:count],
                    pairs)  # fmt: skip


class _EngineVectors:
    """`MilvusIndex.vectors`: window rows read from the engine by a slice (``vectors[first:last]``)."""

    def __init__(self, index: MilvusIndex) -> None:
        self.index = index

    def __getitem__(self, rows: slice) -> np.ndarray:
        start, stop, step = rows.indices(int(self.index.offsets[-1]))
        first, last = np.searchsorted(self.index.offsets, [start, stop - 1], side="right") - 1
        found, _, vectors = self.index._windows(np.arange(first, last + 1))
        return vectors[(found >= start) & (found < stop)][::step]


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


def _hit_arrays(hits: Any) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, distances) of one query's search hits, in their order: from the arrays pymilvus keeps
    (``ids``, ``distances``) rather than a dict per hit (a thousand hits: 0.03 ms rather than 0.26 here), or from
    the hits themselves where they are plain dicts (a list of them)."""
    ids, distances = getattr(hits, "ids", None), getattr(hits, "distances", None)
    if ids is None or distances is None:
        ids, distances = [hit["id"] for hit in hits], [hit["distance"] for hit in hits]
    return np.asarray(ids, dtype=np.int64).reshape(-1), np.asarray(distances, dtype=np.float32).reshape(-1)


def _rows_filter(rows: np.ndarray, docs: np.ndarray, total: int, over: int) -> str:
    """The filter that keeps the window rows `rows`, every window of the documents `docs`, of a collection of `total`:
    by primary key (``id in [...]``) where they are at most 1/`over` of the collection, else by document number
    (``doc in [...]``: a shorter expression, but a scan of the ``doc`` field); `over` 0: by document always. Measured
    by hand in session 52. Milvus Lite 2.5.1 (`over` 128): at 1M windows 2,000 rows took 11 ms by key and 16 by
    document, 16,000 took 67 and 62; on QMSum (52,732 windows) a dense query took 134 ms by key and 74 by
    document. A Milvus 2.3.5 server (`over` 0): the search among 2,000 rows took 12.5 ms by key and 10 by document
    at 1M windows, and a dense query 20.4 and 13.3 ms at 100,000."""
    if over and len(rows) * over <= total:
        return f"id in {rows.tolist()}"
    return f"doc in {docs.tolist()}"


def _documents_of(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The document of each window row `rows` (document d holds the rows ``offsets[d]:offsets[d + 1]``)."""
    return np.searchsorted(offsets, rows, side="right") - 1


def _window_rows(offsets: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """The window rows of the documents numbered `docs`, in order: ``offsets[d]:offsets[d + 1]`` for each."""
    counts = offsets[docs + 1] - offsets[docs]
    return np.repeat(offsets[docs] - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))


def _grouped_scores(
    query: torch.Tensor, docs: np.ndarray, owners: np.ndarray, vectors: np.ndarray, scoring: Any
) -> np.ndarray:
    """Scores of the (sorted) documents `docs` for one unit `query`, each on the `vectors` whose owner it is."""
    order = np.argsort(owners, kind="stable")
    counts = np.bincount(np.searchsorted(docs, owners[order]), minlength=len(docs))
    subset = MultiVectors(vectors[order], np.concatenate([[0], np.cumsum(counts)]))
    return multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()


def _recorded_tokenizer(recorded: dict[str, Any]) -> Any:
    """bm25s's tokenizer with the vocabulary recorded at load (as `LexicalIndex.open` reads it from its folder)."""
    from lengthwise.longdoc.search.lexical import _tokenizer

    tokenizer = _tokenizer(recorded["settings"]["language"])
    tokenizer.word_to_stem = recorded["word_to_stem"]
    tokenizer.stem_to_sid = recorded["stem_to_sid"]
    tokenizer.word_to_id = recorded["word_to_id"]
    return tokenizer
