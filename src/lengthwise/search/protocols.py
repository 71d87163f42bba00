"""The search room's seams: what a search needs of the window store, of the lexical side, and of the long-document
method that made the windows. Each is a `typing.Protocol`: a backend satisfies it by its methods, not by a base class.

- `WindowStore`: the window vectors of a corpus, searched by document (`lengthwise.search.local.windows.LocalWindows`
  on an index folder, `lengthwise.search.milvus.windows.MilvusWindows` in Milvus).
- `LexicalSide`: BM25 over the documents' text at one or both granularities (`lengthwise.search.lexical`, or the
  Milvus collections' `lengthwise.search.milvus.lexical.EngineLexical`).
- `WindowMethod`: how the index's windows were made from a text (the long-document room's, handed over by the
  junction: `lengthwise.longdoc.method.LONG_DOCUMENTS`), so that queries are embedded, documents scored from their
  windows and texts cut into windows as the encode did.
- `SearchIndex`: what `lengthwise.search.backend.open_index` returns on either backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.search.types import FusionSettings, Hit, IndexSettings, LexicalSettings, TokenSettings

__all__ = ["LexicalSide", "QueryEncoder", "SearchIndex", "WindowCut", "WindowMethod", "WindowStore"]

Ranked = list[list[tuple[str, float]]]  # per query, (document id, score) best first


class WindowStore(Protocol):
    """The window vectors of a corpus, searched by document: every document's windows in order, rows
    ``offsets[d]:offsets[d + 1]`` of the document numbered d (its place in `doc_ids`)."""

    @property
    def doc_ids(self) -> list[str]: ...

    @property
    def offsets(self) -> np.ndarray: ...

    def window_vectors(self, first: int, last: int) -> np.ndarray:
        """The unit window vectors of rows `first` to `last` (fp32, (last - first, D))."""
        ...

    def rows_vectors(self, rows: np.ndarray) -> np.ndarray:
        """The unit window vectors of the ascending window `rows` (fp32, (len(rows), D)), in one read."""
        ...

    def default_candidates(self) -> int:
        """Candidate windows per dense query when none are asked for."""
        ...

    def search_vectors(
        self,
        queries: np.ndarray,
        k: int = 10,
        *,
        scoring: WindowScoring | int = 1,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
    ) -> Ranked:
        """The `k` best (id, exact score) per query row, best first."""
        ...

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
        """Per query row, the numbers of its `count` best candidate documents (a hybrid search's dense side)."""
        ...

    def document_scores(self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring | int) -> np.ndarray:
        """Exact fp32 scores of the documents numbered `docs` for one unit `query`, over every window of each."""
        ...

    def whole_scans(
        self,
        units: torch.Tensor,
        scoring: WindowScoring | int,
        count: int,
        search_threads: int | None = None,
        *,
        windows: list[torch.Tensor] | None = None,
    ) -> list[torch.Tensor | None]:
        """Per unit query row, every document's exact scores (n,) when the store reads them for the whole batch at
        once (a few long documents), else None each; then, where the store keeps them, each query's (W,) window
        cosines appended to `windows`."""
        ...

    def scan(self, units: torch.Tensor, scoring: WindowScoring | int) -> torch.Tensor:
        """(Q, n) exact scores of every document for unit queries, over every window (checks and evaluation)."""
        ...


class LexicalSide(Protocol):
    """BM25 over the documents' text, with each window's character span: one granularity, or both."""

    @property
    def settings(self) -> LexicalSettings:
        """What the side records: its granularity, BM25's parameters, the mode and fusion a tuning chose."""
        ...

    def query_tokens(self, query: str) -> list[int]:
        """The query's terms as the side's vocabulary numbers them (unknown words and stop words left out)."""
        ...

    def scores(self, query: str) -> np.ndarray:
        """Every document's BM25 score for a lexical search (n,)."""
        ...

    def side_scores(self, query: str, depth: int | None = None) -> np.ndarray:
        """(s, n): every document's score on each of the s BM25 sides a hybrid search fuses (the window side last)."""
        ...

    def side_scores_at(self, query: str, sides: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """`sides` with the documents `docs` scored exactly on every side (a side that holds only its own best)."""
        ...

    def text(self, doc: int) -> str:
        """The document's text."""
        ...

    def passage(self, row: int) -> tuple[int, int]:
        """The character span of window `row` in its document's text."""
        ...

    def passages(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 2) int64: the character spans of window `rows` (of one document), read at once."""
        ...


class QueryEncoder(Protocol):
    """Queries embedded as the index's documents were (`lengthwise.longdoc.encoder.LongEncoder` is one)."""

    def encode_queries(self, texts: Sequence[str], *, batch_size: int = 32) -> np.ndarray: ...


class WindowCut(Protocol):
    """A document's text cut into the window rows the index holds for it."""

    @property
    def key(self) -> str:
        """Names the cut (the long-document settings, the text tokens a window holds, the tokenizer): a lexical side
        built under another key cuts otherwise."""
        ...

    def __call__(self, text: str) -> np.ndarray:
        """(rows, 2) character spans of the document's window rows, in order."""
        ...


class WindowMethod(Protocol):
    """How an index's windows were made, read from the long-document settings its encode recorded (``long`` in the
    manifest). The long-document room implements it; the junction hands it to the search room."""

    def scoring(self, long: Mapping[str, object]) -> WindowScoring:
        """How a document scores from its windows."""
        ...

    def query_encoder(self, model: SentenceTransformer, long: Mapping[str, object]) -> QueryEncoder:
        """The query encoder around a loaded model."""
        ...

    def window_cut(self, model: SentenceTransformer, long: Mapping[str, object]) -> WindowCut:
        """How a document's text is cut into its window rows (the lexical side's passages)."""
        ...

    def query_tokens(self, model: SentenceTransformer, texts: Sequence[str], tokens: TokenSettings) -> list[np.ndarray]:
        """Each query's token vectors (q_i, D), unit rows, read as a token folder's `tokens` settings say."""
        ...


class SearchIndex(Protocol):
    """An index as served, on either backend (`lengthwise.search.index.LongIndex`,
    `lengthwise.search.milvus.index.MilvusIndex`): searched by text, its query model loaded as recorded."""

    @property
    def doc_ids(self) -> list[str]: ...

    @property
    def numbers(self) -> dict[str, int]: ...

    @property
    def settings(self) -> IndexSettings: ...

    @property
    def name(self) -> str:
        """The index as a refusal names it: its folder, or its URI."""
        ...

    @property
    def fusion(self) -> FusionSettings: ...

    @property
    def scoring(self) -> WindowScoring: ...

    @property
    def lexical(self) -> LexicalSide | None: ...

    def search_mode(self, mode: str | None = None) -> Mode: ...

    def embed_queries(self, queries: Sequence[str], batch_size: int = 32) -> np.ndarray: ...

    def set_query_precision(self, precision: str | None) -> None: ...

    @property
    def queries_embedded_at(self) -> str: ...

    def use_tokens(
        self,
        folder: str | os.PathLike[str] | None,
        *,
        weight: float | None = None,
        depth: int | None = None,
        around: int | None = None,
    ) -> None: ...

    @property
    def token_stage(self) -> dict[str, object] | None: ...

    def search(
        self,
        queries: str | Sequence[str],
        k: int = 10,
        *,
        mode: str | None = None,
        passages: int = 0,
        candidates: int | None = None,
        probes: int | None = None,
        depth: int | None = None,
        vectors: np.ndarray | None = None,
        search_threads: int | None = None,
        tokens: Sequence[np.ndarray] | None = None,
    ) -> list[list[Hit]]: ...

    def embed_for_search(
        self, queries: Sequence[str], mode: str | None = None
    ) -> tuple[np.ndarray | None, list[np.ndarray] | None]: ...

    def ranked_with_exact(self, texts: list[str], k: int, mode: Mode) -> dict[str, Ranked]: ...

    def searched_with(self, mode: Mode) -> dict[str, object]: ...

    def check_corpus(self, data: str | os.PathLike[str]) -> None: ...
