"""The window vectors of an index folder, searched by document: `LocalWindows`, the local `WindowStore`.

It reads the fp32 window vectors from a memory map (never loaded whole) and its ANN engine's file
(`lengthwise.search.local.engines`); the engine proposes distinct vectors, each standing for every window that holds
it, and the documents they reach are rescored exactly with `lengthwise.core.encoder.multi_vector_scores`: first on
their candidate windows, then the best on all their windows (`lengthwise.search.index` describes the folder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch

from lengthwise.core.encoder import ROW_BLOCK, MultiVectors, multi_vector_scores, row_products
from lengthwise.core.errors import LongDocError
from lengthwise.core.parallel import each, search_pool
from lengthwise.core.scoring import WindowScoring
from lengthwise.search.local.engines import CANDIDATES, ENGINES
from lengthwise.search.local.files import REBUILD, consistent_files, read_ids, read_members, read_settings
from lengthwise.search.local.generations import GENERATION, Hold
from lengthwise.search.rows import documents_of, rescored_count
from lengthwise.search.types import Engine, IndexSettings, Quantize

if TYPE_CHECKING:
    from lengthwise.search.local.engines import EngineIndex

__all__ = ["EXPANDED_AT_MOST", "LocalWindows"]

EXPANDED_AT_MOST = 1_000_000  # windows a query's candidate vectors may stand for (see `LocalWindows._expanded`)
WHOLE_SCAN_FLOATS = 1 << 24  # query-window products `LocalWindows.whole_scans` holds at once (64 MiB of fp32)
_Windows = TypeVar("_Windows", bound="LocalWindows")


@dataclass(eq=False, repr=False)
class LocalWindows:
    """The window vectors of an index folder on an ANN engine, searched by document (see the module docstring);
    `lengthwise.search.index.LongIndex` builds and opens one and searches through it."""

    folder: Path
    settings: IndexSettings
    doc_ids: list[str]
    offsets: np.ndarray  # (n + 1,) window offsets of each document in `vectors`
    vectors: np.ndarray  # (W, D) fp32, memory-mapped
    engine: EngineIndex  # its keys are distinct-vector numbers
    members: np.ndarray | None = None  # (W,) window rows grouped by distinct vector (None: one per window)
    starts: np.ndarray | None = None  # (U + 1,) where each distinct vector's rows start in `members`
    files: Path | None = None  # the folder of the generation opened (None: `folder` itself, a build's staging)
    hold: Hold | None = None  # the reader's hold on that generation: no build removes it while the index is open

    def __post_init__(self) -> None:
        if self.members is None or self.starts is None:
            self.members = np.arange(len(self.vectors), dtype=np.int64)
            self.starts = np.arange(len(self.vectors) + 1, dtype=np.int64)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.folder)!r})"

    @property
    def replaced(self) -> bool:
        """Whether a later build of the folder serves another generation now than the one this index answers from
        (a long-lived process, such as a service, opens the folder again to serve it)."""
        try:
            return read_settings(Path(self.folder))[GENERATION] != self.settings.get(GENERATION)
        except LongDocError:
            return True

    @classmethod
    def open_files(cls: type[_Windows], folder: Path, files: Path, settings: IndexSettings) -> _Windows:
        """The index `folder` with `settings` (its ``index.json``), its files read from `files` (its generation)."""
        try:
            engine = Engine(settings["engine"])
            doc_ids = read_ids(files / "ids.txt")
            offsets = np.load(files / "offsets.npy", allow_pickle=False)
            vectors = np.load(files / "vectors.npy", mmap_mode="r", allow_pickle=False)
            members, starts = read_members(files)
            ann = ENGINES[engine].load(files / f"engine.{engine.value}", Quantize(settings["quantize"]))
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
            raise LongDocError(None, None, f"{folder}: unreadable index ({error}); {REBUILD}") from None
        if not consistent_files(settings, doc_ids, offsets, vectors, members, starts, ann.count()):
            raise LongDocError(None, None, f"{folder}: the index files disagree in size or order; {REBUILD}")
        return cls(folder, settings, doc_ids, offsets, vectors, ann, members, starts, files=files)

    def default_probes(self) -> int:
        """FAISS: a quarter of the IVF lists (at least 32); USearch: a search expansion of 64."""
        nlist = self.settings.get("nlist") or 0
        return max(32, nlist // 4) if self.settings["engine"] == Engine.FAISS.value else 64

    def default_candidates(self) -> int:
        """Candidate windows per query: 1,000, or 4,000 over sign bits (``ubinary``), whose candidates held 0.95
        (USearch) and 0.94 (FAISS) of the exact top-100 SciFact documents at 1,000, and 0.998 and 0.980 at 4,000."""
        return CANDIDATES[Quantize(self.settings["quantize"])]

    def _candidate_vectors(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the keys of its `candidates` nearest distinct vectors in the engine, nearest first. `probes`
        beyond what the index has (FAISS: its lists; USearch: its vectors) are the same as all of them."""
        assert self.starts is not None and self.members is not None
        distinct = len(self.starts) - 1
        if candidates >= distinct:  # every distinct vector a candidate: ranked exactly, no approximate search to miss
            heads = np.asarray(self.vectors[self.members[self.starts[:-1]]], dtype=np.float32)
            return [np.argsort(-(heads @ query), kind="stable") for query in np.asarray(queries, dtype=np.float32)]
        probes = min(probes, self.settings.get("nlist") or distinct) if self.engine.count() else 1
        self.engine.set_probes(max(1, probes))
        found = self.engine.search(np.asarray(queries, dtype=np.float32), max(1, min(candidates, distinct)))
        return [row[row >= 0] for row in found]

    def _expanded(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, key of each row): every window holding one of the distinct vectors `keys` (nearest first), in
        key order. A query stands for at most `EXPANDED_AT_MOST` windows: vectors are taken nearest first while
        they fit (the first always whole), so a document reached only through a farther vector shared by a very
        large number of windows is left out, as with fewer candidate windows."""
        assert self.members is not None and self.starts is not None
        firsts, counts = self.starts[keys], self.starts[keys + 1] - self.starts[keys]
        kept = max(1, int(np.searchsorted(np.cumsum(counts), EXPANDED_AT_MOST, side="right")))
        firsts, counts, keys = firsts[:kept], counts[:kept], keys[:kept]
        ends = np.cumsum(counts)
        positions = np.arange(int(ends[-1]) if len(ends) else 0) - np.repeat(ends - counts - firsts, counts)
        return np.asarray(self.members[positions], dtype=np.int64), np.repeat(keys, counts)

    def candidate_windows(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the windows holding one of its `candidates` nearest distinct vectors in the engine
        (approximate), as sorted window numbers (a vector many windows share brings all of them)."""
        return [np.sort(self._expanded(keys)[0]) for keys in self._candidate_vectors(queries, candidates, probes)]

    def candidate_documents(self, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        """Per query, the distinct documents of its candidate windows (`candidate_windows`)."""
        owners = (self._owner(row) for row in self.candidate_windows(queries, candidates, probes))
        return [np.unique(owner) for owner in owners]

    def _owner(self, windows: np.ndarray) -> np.ndarray:
        """The document of each window number."""
        return documents_of(self.offsets, windows)

    def document_scores(self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring | int) -> np.ndarray:
        """Exact fp32 scores of the documents numbered `docs` for one unit `query`, over every window of each."""
        if not len(docs):
            return np.zeros(0, dtype=np.float32)
        if len(docs) == len(self.doc_ids) and np.array_equal(docs, np.arange(len(docs))):  # every document
            return self.scan(query[None], scoring)[0].numpy()
        firsts, counts = self.offsets[docs], self.offsets[docs + 1] - self.offsets[docs]
        offsets = np.concatenate([[0], np.cumsum(counts)])
        rows = np.arange(offsets[-1]) + np.repeat(firsts - offsets[:-1], counts)  # each document's windows in turn
        subset = MultiVectors(np.asarray(self.vectors[rows]), offsets)
        return multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()

    def whole_scans(
        self,
        units: torch.Tensor,
        scoring: WindowScoring | int,
        count: int,
        search_threads: int | None = None,
        *,
        windows: list[torch.Tensor] | None = None,
    ) -> list[torch.Tensor | None]:
        """Per unit query row, every document's exact scores (n,), when a query's rescoring may reach `count`
        documents and the index holds no more (a few long documents: each query would read every window), else None
        each. The windows are read once for the whole batch, in blocks spread over `search_threads` (`row_products`:
        a query's scores are the same bits alone and in a batch of any size; a query alone takes this path too, so
        its hits are the same). `windows`, when given: each query's (W,) window cosines are appended to it (the
        token stage reads a document's best windows there instead of reading its vectors again; the caller bounds
        the batch, Q · W floats)."""
        if len(self.doc_ids) > count or not len(units) or not len(self.vectors):
            return [None] * len(units)
        blocks = -(-len(self.vectors) // ROW_BLOCK)
        products = partial(row_products, pool=search_pool(search_threads, blocks))
        if windows is not None:
            products = partial(_keeping, products, windows, len(self.vectors))
        held = len(self.vectors)  # floats a query's scoring holds: its products, or every document's padded windows
        if WindowScoring.of(scoring).best_windows > 1:
            held = max(held, len(self.doc_ids) * int(np.diff(self.offsets).max()))
        step = max(1, WHOLE_SCAN_FLOATS // held)  # queries a pass: what they hold fits the bound
        passes = (self.scan(units[first : first + step], scoring, products) for first in range(0, len(units), step))
        return [row for scores in passes for row in scores]

    def scan(
        self,
        units: torch.Tensor,
        scoring: WindowScoring | int,
        products: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """(Q, n) exact scores of every document for unit queries, read from the memory map as it is (no copy);
        `products` as `multi_vector_scores` takes it."""
        return multi_vector_scores(units, MultiVectors(self.vectors, self.offsets), scoring, unit=True,
                                   products=products)  # fmt: skip

    def _provisional(
        self, query: torch.Tensor, keys: np.ndarray, scoring: WindowScoring | int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(documents, scores): each document holding a candidate vector, scored on its candidate vectors (each
        distinct vector once per document; each read once, however many windows share it)."""
        assert self.members is not None and self.starts is not None
        rows, row_keys = self._expanded(keys)
        distinct = len(self.starts) - 1
        pairs = np.unique(self._owner(rows) * distinct + row_keys)  # (document, vector), by document
        docs, first = np.unique(pairs // distinct, return_index=True)
        read = np.sort(np.unique(row_keys))
        vectors = np.asarray(self.vectors[self.members[self.starts[read]]])
        subset = MultiVectors(vectors[np.searchsorted(read, pairs % distinct)], np.append(first, len(pairs)))
        return docs, multi_vector_scores(query[None], subset, scoring, unit=True)[0].numpy()

    def _rescored(
        self, query: torch.Tensor, keys: np.ndarray, k: int, scoring: WindowScoring | int, whole: torch.Tensor | None
    ) -> list[tuple[str, float]]:
        """The `k` best documents for one query from its candidate vectors `keys` (nearest first): every document
        holding one scored on its candidate vectors (`_provisional`), then the best `RESCORED` · k (at least 100)
        scored on all their windows (exact fp32; read from `whole`, every document's scores, when given)."""
        docs, provisional = self._provisional(query, keys, scoring)
        docs = np.sort(docs[np.argsort(-provisional, kind="stable")[: rescored_count(k)]])
        scores = self.document_scores(query, docs, scoring) if whole is None else whole.numpy()[docs]
        best = np.argsort(-scores, kind="stable")[:k]
        return [(self.doc_ids[docs[j]], float(scores[j])) for j in best]

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
        """The `k` best documents per (normalised) query row: candidates from the engine, rescored exactly.

        Args:
            queries: (Q, D) query vectors.
            k: Documents per query.
            scoring: How a document scores from its windows (`WindowScoring`; an int is a top-k: 1 = max).
            candidates: Candidate distinct window vectors the engine returns per query, each standing for every
                window that holds it (more: higher recall, slower; default `default_candidates`: 1,000, or 4,000
                over sign bits).
            probes: FAISS IVF lists visited (default: a quarter of the lists, which found ≥ 0.98 of the exact top-100
                documents on SciFact) or USearch's search expansion (default 64); more than the index has are the
                same as all of them.
            search_threads: Threads the queries' rescoring is spread over (default: one per core less one, 1–32;
                `lengthwise.core.parallel`); the engine searches them all in one call. The hits do not depend on it.
        """
        probes = probes if probes is not None else self.default_probes()
        candidates = candidates if candidates is not None else self.default_candidates()
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        found = self._candidate_vectors(units.numpy(), candidates, probes)
        wholes = self.whole_scans(units, scoring, rescored_count(k), search_threads)

        def rescored(query: tuple[torch.Tensor, np.ndarray, torch.Tensor | None]) -> list[tuple[str, float]]:
            return self._rescored(query[0], query[1], k, scoring, query[2]) if len(query[1]) else []

        return each(search_pool(search_threads, len(found)), rescored, zip(units, found, wholes, strict=True))

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
        """Per (normalised) query row, the document numbers of its `count` best candidates, ranked on their candidate
        windows only (the first of `search_vectors`' two steps; a hybrid search scores the proposals of both sides
        on all their windows itself); the queries spread over `search_threads` as in `search_vectors`."""
        probes = probes if probes is not None else self.default_probes()
        candidates = candidates if candidates is not None else self.default_candidates()
        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        found = self._candidate_vectors(units.numpy(), candidates, probes)

        def proposed(query: tuple[torch.Tensor, np.ndarray]) -> np.ndarray:
            if not len(query[1]):
                return np.zeros(0, dtype=np.int64)
            docs, provisional = self._provisional(query[0], query[1], scoring)
            return np.asarray(docs[np.argsort(-provisional, kind="stable")[:count]], dtype=np.int64)

        return each(search_pool(search_threads, len(found)), proposed, zip(units, found, strict=True))

    def window_vectors(self, first: int, last: int) -> np.ndarray:
        """The unit window vectors of rows `first` to `last`, read from the memory map."""
        return np.asarray(self.vectors[first:last])

    def rows_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The unit window vectors of the ascending window `rows`, read from the memory map."""
        return np.asarray(self.vectors[rows])


def _keeping(
    products: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    kept: list[torch.Tensor],
    windows: int,
    queries: torch.Tensor,
    vectors: torch.Tensor,
) -> torch.Tensor:
    """`products(queries, vectors)`, each query's row also appended to `kept` when `vectors` are the `windows`
    window rows (not the documents' mean vectors a scoring that fuses them asks for too)."""
    out = products(queries, vectors)
    if len(vectors) == windows:
        kept.extend(out)
    return out
