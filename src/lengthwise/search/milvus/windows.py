"""The window vectors of an index served from Milvus, searched by document: `MilvusWindows`, a `WindowStore`.

One engine row per window (its row number, its document number, its fp32 vector): the engine proposes its nearest
windows, lengthwise scores their documents, as the local index does with USearch or FAISS: the candidate windows rank
their documents, and the best documents are read back whole (every window's vector, by primary key) or compared
whole by a filtered search, and scored exactly with `lengthwise.core.encoder.multi_vector_scores`. A document
therefore gets the score it gets from the local index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lengthwise.core.encoder import MultiVectors, multi_vector_scores
from lengthwise.core.errors import LongDocError
from lengthwise.core.parallel import each, search_pool
from lengthwise.core.scoring import WindowScoring
from lengthwise.search.milvus.client import Hits, MilvusClient
from lengthwise.search.milvus.store import LISTS, READ_ROWS, SEARCH_LIMIT, hit_arrays
from lengthwise.search.rows import documents_of, rescored_count, window_rows

__all__ = ["CANDIDATES", "MilvusWindows"]

ROWS_BY_DOCUMENT = {"lite": 128, "server": 0}  # by engine: a filter keeping over 1/N of the rows names documents, not
# rows (`_rows_filter`; 0: always documents)
CANDIDATES = 1_000  # candidate windows per dense query, as the local index's int8 default


@dataclass(eq=False)
class MilvusWindows:
    """The window vectors of one served index (its windows collection), searched by document (see the module
    docstring)."""

    client: MilvusClient
    uri: str
    collection: str  # the windows collection the served name named when opened
    doc_ids: list[str]
    offsets: np.ndarray  # (n + 1,)
    kind: str = "server"  # the engine (`engine_kind`): how many rows a read asks for, and who scores a document

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.uri!r}, {self.collection!r})"

    def _windows(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, documents, vectors) of every window of the sorted documents `docs`, by row (`_read_rows`)."""
        rows, vectors = self._read_rows(window_rows(self.offsets, docs))
        return rows, documents_of(self.offsets, rows), vectors

    def _read_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, vectors) of the window rows `rows` found in the engine, by row. A document's windows are the rows
        ``offsets[d]:offsets[d + 1]``, so they are read by primary key (``id in [...]``), `read_rows` rows a query
        (each query is a round trip): a filter on the document field, or on row ranges, makes Milvus Lite 3.x scan
        the collection (a dense query at 1M windows took 4.8 s that way, 1.1 s by primary key: docs/benchmarks.md,
        "At 1M windows")."""
        step = self.read_rows
        found = [self._read(rows[first : first + step]) for first in range(0, len(rows), step)]
        found = [(ids, vectors) for ids, vectors in found if len(ids)] or [
            (np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
        ]
        rows, vectors = np.concatenate([ids for ids, _ in found]), np.concatenate([v for _, v in found])
        order = np.argsort(rows, kind="stable")
        return rows[order], vectors[order]

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
        hundredth; asked for every window, all came back (`benchmarks/search/milvus_exactness.py`)."""
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
            rows = window_rows(self.offsets, docs[first:last])
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

    def window_vectors(self, first: int, last: int) -> np.ndarray:
        """The unit window vectors of rows `first` to `last`, read back from the engine by primary key."""
        return self.rows_vectors(np.arange(first, last, dtype=np.int64))

    def rows_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The unit window vectors of the ascending window `rows`, read back from the engine by primary key."""
        ids, vectors = self._read_rows(np.asarray(rows, dtype=np.int64))
        if len(ids) != len(rows):
            raise LongDocError(None, None, f"{self.uri}: {len(rows) - len(ids)} of {len(rows)} window rows (from "
                               f"{int(rows[0])} to {int(rows[-1])}) are missing from {self.collection}; load the "
                               "index again")  # fmt: skip
        return vectors

    def _every_window(self) -> MultiVectors:
        """Every window's vector, read from the engine once and kept (exact scans: evaluation, not serving)."""
        if "_every" not in self.__dict__:
            every = np.arange(len(self.doc_ids))
            self.__dict__["_every"] = MultiVectors(self._windows(every)[2], self.offsets)
        return self.__dict__["_every"]

    def default_candidates(self) -> int:
        """Candidate windows per dense query when none are asked for (`CANDIDATES`)."""
        return CANDIDATES

    def scan(self, units: torch.Tensor, scoring: WindowScoring | int) -> torch.Tensor:
        """(Q, n) exact scores of every document, every window read back from the engine (for checks and
        evaluation, not for serving). The lexical side's exact scan is the engine's sparse search (exact up to
        `SEARCH_LIMIT` matching windows)."""
        return multi_vector_scores(units, self._every_window(), scoring, unit=True)

    def whole_scans(
        self,
        units: torch.Tensor,
        scoring: WindowScoring | int,
        count: int,
        search_threads: int | None = None,
        *,
        windows: list[torch.Tensor] | None = None,
    ) -> list[torch.Tensor | None]:
        """None for each query: the engine scores each query's documents on their own (`document_scores`)."""
        return [None] * len(units)

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

    def _hits(self, hits: Hits) -> tuple[np.ndarray, np.ndarray]:
        """(documents, similarities) of a dense search's hits, in its order: a window's document from its row
        number (`offsets`)."""
        rows, similarities = hit_arrays(hits)
        return documents_of(self.offsets, rows), similarities

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

    def _found(
        self, queries: np.ndarray, scoring: WindowScoring | int, candidates: int | None, probes: int | None
    ) -> tuple[torch.Tensor, WindowScoring, list[tuple[np.ndarray, np.ndarray]]]:
        """The unit query rows, the scoring, and each query's candidate windows in the engine (`_candidates`;
        `CANDIDATES` and 64 probes unless asked)."""
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        rule = WindowScoring.of(scoring)
        return units, rule, self._candidates(units, candidates or CANDIDATES, probes or 64, rule)

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
        units, scoring, found = self._found(queries, scoring, candidates, probes)

        def rescored(pair: tuple[torch.Tensor, tuple[np.ndarray, np.ndarray]]) -> list[tuple[str, float]]:
            docs = np.sort(self._proposed(pair[0], pair[1], scoring)[: rescored_count(k)])
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
        units, scoring, found = self._found(queries, scoring, candidates, probes)
        pairs = zip(units, found, strict=True)
        return each(search_pool(search_threads, len(found)), lambda p: self._proposed(p[0], p[1], scoring)[:count],
                    pairs)  # fmt: skip


def _rows_filter(rows: np.ndarray, docs: np.ndarray, total: int, over: int) -> str:
    """The filter that keeps the window rows `rows`, every window of the documents `docs`, of a collection of `total`:
    by primary key (``id in [...]``) where they are at most 1/`over` of the collection, else by document number
    (``doc in [...]``: a shorter expression, but a scan of the ``doc`` field); `over` 0: by document always. Measured
    by hand. Milvus Lite 2.5.1 (`over` 128): at 1M windows 2,000 rows took 11 ms by key and 16 by
    document, 16,000 took 67 and 62; on QMSum (52,732 windows) a dense query took 134 ms by key and 74 by
    document. A Milvus 2.3.5 server (`over` 0): the search among 2,000 rows took 12.5 ms by key and 10 by document
    at 1M windows, and a dense query 20.4 and 13.3 ms at 100,000."""
    if over and len(rows) * over <= total:
        return f"id in {rows.tolist()}"
    return f"doc in {docs.tolist()}"


def _grouped_scores(
    query: torch.Tensor, docs: np.ndarray, owners: np.ndarray, vectors: np.ndarray, scoring: WindowScoring | int
) -> np.ndarray:
    """Scores of the (sorted) documents `docs` for one unit `query`, each on the `vectors` whose owner it is."""
    order = np.argsort(owners, kind="stable")
    counts = np.bincount(np.searchsorted(docs, owners[order]), minlength=len(docs))
    subset = MultiVectors(vectors[order], np.concatenate([[0], np.cumsum(counts)]))
    return multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()
