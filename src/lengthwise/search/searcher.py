"""A search over one index: text queries in, ranked documents with their passages out.

`Searcher` composes what an index holds: its window store (`WindowStore`: the local folder's engine and vectors, or
Milvus), its lexical side (`LexicalSide`: BM25 at one or both granularities; None without text), its query model
(`QueryModel`) and how a document scores from its windows. Calls run one way: the index → this module → the two
sides' protocols; nothing here calls back into an index.

Each side proposes its `depth` best documents; every proposed document is scored exactly on both sides and fused by
the rule the index records (`lengthwise.search.fusion`). A hit carries its best windows as passages: the character
span in the document's text and the text, ranked by the window's own dense cosine (dense and hybrid) or by the query
terms it holds (lexical).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, cast

import numpy as np
import torch

from lengthwise.core.encoder import row_products
from lengthwise.core.errors import SettingError
from lengthwise.core.forwards import shared_forwards
from lengthwise.core.fusion import Mode
from lengthwise.core.parallel import each, search_pool
from lengthwise.search.fusion import fuse, top
from lengthwise.search.rows import best_rows, window_rows
from lengthwise.search.types import FusionSettings, Hit, Passage

if TYPE_CHECKING:
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.search.protocols import LexicalSide, WindowStore
    from lengthwise.search.query_model import QueryModel
    from lengthwise.search.tokens import TokenStage

__all__ = ["Searcher"]

DenseFound = list[tuple[str, float]] | np.ndarray  # per query: dense hits (dense mode), proposed documents (hybrid)
KEPT_COSINES = 1 << 26  # window cosines a batch keeps for the token stage at most (256 MiB of fp32); more: in parts


@dataclass(eq=False)
class Searcher:
    """Searches one index's window store and lexical side with its query model (see the module docstring).

    Args:
        store: The window vectors, searched by document.
        lexical: The lexical side, or None for an index built without text.
        queries: The query model.
        scoring: How a document scores from its windows.
        without_text: Why a mode that needs text is refused on an index without it (what it is and the fix).
        tokens: The token side, when a hybrid search's best documents are rescored by their tokens (`TokenStage`).
    """

    store: WindowStore
    lexical: LexicalSide | None
    queries: QueryModel
    scoring: WindowScoring
    without_text: str
    tokens: TokenStage | None = None

    @cached_property
    def numbers(self) -> dict[str, int]:
        """Each document id's number (its place in the store's `doc_ids`), built on first use."""
        return {doc_id: n for n, doc_id in enumerate(self.store.doc_ids)}

    @property
    def fusion(self) -> FusionSettings:
        """The hybrid fusion settings recorded in the index (the defaults before any tuning)."""
        return FusionSettings.recorded(None if self.lexical is None else self.lexical.settings)

    def mode(self, mode: str | None = None) -> Mode:
        """The search `mode` asked for (``dense``, ``lexical`` or ``hybrid``), checked against what the index holds
        (a mode that needs text is refused with `without_text` on an index without it). None: the mode recorded by a
        tuning, else hybrid when the index holds text, else dense."""
        lexical, without_text = self.lexical, self.without_text
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
    ) -> list[list[Hit]]:
        """The `k` best documents for each query, best first, as `Hit`s (id, score, each side's exact score, and the
        `passages` best windows of each with their character spans and text).

        Args:
            queries: One query or several.
            k: Documents per query.
            mode: ``dense`` (the window vectors), ``lexical`` (BM25) or ``hybrid`` (both, fused by the settings
                recorded in the index); default: the index's recorded mode (hybrid when it holds text).
            passages: Best windows returned with each hit (0: none).
            candidates, probes: The dense side's candidate windows and probes (`search_vectors`).
            depth: Documents each side proposes to a hybrid search (at least 10·k; default: the index's recorded
                fusion, 100). Deeper finds more of the exact fused top k where many documents tie on one side
                (near-duplicates), at some cost per query (docs/longdoc.md, the 10M-window run).
            vectors: The queries' vectors when already embedded (`QueryModel.embed`, or `embed_for_search`; e.g. by
                a service that embeds the next batch while this one is searched); embedded here when None.
            tokens: With `vectors`, the queries' token vectors for the token stage, when `embed_for_search` read them
                (else the stage reads them).
            search_threads: Threads the queries are searched on, each query on one (default: one per core less one,
                1–32; `lengthwise.core.parallel`). The candidate windows of all queries come from one engine call;
                the hits are the same whatever the number of threads.
        """
        texts = _checked(queries, k, passages, candidates, probes, depth, search_threads)
        chosen = self.mode(mode)
        if chosen is Mode.LEXICAL:
            assert self.lexical is not None  # `mode` checked it
            for text in texts:
                if not self.lexical.query_tokens(text):
                    raise SettingError("query", text, "holds no word the documents hold (stop words only, or "
                                       "unknown words): nothing to search lexically; use dense or hybrid")  # fmt: skip
            vectors, tokens = None, None
        elif vectors is None:
            vectors, tokens = self.embed_for_search(texts, chosen)
        elif len(vectors) != len(texts):
            raise SettingError("vectors", len(vectors), f"give one vector per query ({len(texts)})")
        fusion = self.fusion if depth is None else replace(self.fusion, depth=depth)
        return self.rank(vectors, texts, k, chosen, fusion, passages=passages, candidates=candidates, probes=probes,
                         search_threads=search_threads, tokens=tokens)  # fmt: skip

    def embed_for_search(self, texts: Sequence[str], mode: Mode) -> tuple[np.ndarray | None, list[np.ndarray] | None]:
        """What a search in `mode` reads of its queries: their vectors (None in lexical mode) and, for a hybrid
        search with the token stage, their token vectors, from the same forward pass where the stage's model is the
        query model (`lengthwise.core.forwards.shared_forwards`; else None)."""
        if mode is Mode.LEXICAL:
            return None, None
        if mode is not Mode.HYBRID or self.tokens is None:
            return self.queries.embed(texts), None
        with shared_forwards():
            return self.queries.embed(texts), list(self.tokens.encode(texts))

    def rank(
        self,
        vectors: np.ndarray | None,
        texts: Sequence[str],
        k: int,
        mode: Mode,
        fusion: FusionSettings,
        *,
        passages: int = 0,
        candidates: int | None = None,
        probes: int | None = None,
        search_threads: int | None = None,
        tokens: Sequence[np.ndarray] | None = None,
    ) -> list[list[Hit]]:
        """The `k` best documents per query (`vectors`: unit query rows, None in lexical mode); `candidates` and
        `probes`: the dense side's (`WindowStore.search_vectors`); `tokens`: each query's token vectors for the token
        stage, when already read (else read here). The dense side's candidates of every query come from one engine
        call; then each query is scored, fused and cut into passages on one of `search_threads` threads
        (`lengthwise.core.parallel`; default one per core less one), by the same code as alone."""
        staged = mode is Mode.HYBRID and self.tokens is not None and len(texts) > 0
        around = staged and self.tokens is not None and self.tokens.around is not None
        step = max(1, KEPT_COSINES // max(1, int(self.store.offsets[-1])))
        if around and len(texts) > step:  # each query's window cosines are kept: a batch in parts that fit the bound
            return [hits for first in range(0, len(texts), step) for hits in self.rank(
                None if vectors is None else vectors[first : first + step], texts[first : first + step], k, mode,
                fusion, passages=passages, candidates=candidates, probes=probes, search_threads=search_threads,
                tokens=None if tokens is None else tokens[first : first + step])]  # fmt: skip
        depth = max(fusion.depth, 10 * k)
        dense_lists: Sequence[DenseFound] = [[] for _ in texts]  # dense: (id, score) hits; hybrid: numbers
        if mode is Mode.DENSE:
            assert vectors is not None
            dense_lists = self.store.search_vectors(vectors, k, scoring=self.scoring, candidates=candidates,
                                                      probes=probes, search_threads=search_threads)  # fmt: skip
        elif mode is Mode.HYBRID:  # the dense side's proposals, ranked on their candidate windows; scored below
            assert vectors is not None
            dense_lists = self.store.proposals(vectors, depth, scoring=self.scoring, candidates=candidates,
                                                 probes=probes, search_threads=search_threads)  # fmt: skip

        units = [None if vectors is None else torch.nn.functional.normalize(
            torch.as_tensor(np.asarray(vectors[n], dtype=np.float32)), dim=-1) for n in range(len(texts))]  # fmt: skip
        wholes: list[torch.Tensor | None] = [None] * len(texts)
        cosines: list[torch.Tensor] = []  # each query's window cosines, where the whole scan keeps them
        if mode is Mode.HYBRID and len(texts):  # every document proposed: scored for the whole batch at once
            stacked = torch.stack(cast(list[torch.Tensor], units))
            keep = cosines if around else None
            wholes = self.store.whole_scans(stacked, self.scoring, depth, search_threads, windows=keep)
        windows: Sequence[torch.Tensor | None] = cosines if len(cosines) == len(texts) else [None] * len(texts)

        token_queries: Sequence[np.ndarray | None] = [None] * len(texts)
        if staged and self.tokens is not None:  # the token side's queries, one batch
            token_queries = list(self.tokens.encode(texts)) if tokens is None else tokens
            if len(token_queries) != len(texts):
                raise SettingError("tokens", len(token_queries), f"give one query's token vectors per query "
                                   f"({len(texts)})")  # fmt: skip

        def one(n: int) -> list[Hit]:  # BM25's tokenizer (PyStemmer) holds the GIL: its calls never overlap
            text, query, token_query = texts[n], units[n], token_queries[n]
            kept = k if token_query is None or self.tokens is None else max(k, self.tokens.depth)  # to be rescored
            docs, fused, dense, lexical = self._ranked(mode, fusion, text, query, dense_lists[n], depth, kept,
                                                       wholes[n])  # fmt: skip
            if token_query is None:
                return [self._hit(d, f, dn, lx, query, text, passages)
                        for d, f, dn, lx in zip(docs, fused, dense, lexical, strict=True)]  # fmt: skip
            docs, fused, dense, lexical, scored = self._rescored(docs, fused, dense, lexical, token_query, k, query,
                                                                 windows[n])  # fmt: skip
            return [replace(self._hit(d, f, dn, lx, query, text, passages), tokens=tk,
                            matched=self._matched(int(d), token_query) if passages else None)
                    for d, f, dn, lx, tk in zip(docs, fused, dense, lexical, scored, strict=True)]  # fmt: skip

        return each(search_pool(search_threads, len(texts)), one, range(len(texts)))

    def _ranked(
        self,
        mode: Mode,
        fusion: FusionSettings,
        text: str,
        query: torch.Tensor | None,
        found: DenseFound,
        depth: int,
        k: int,
        whole: torch.Tensor | None = None,
    ) -> tuple[np.ndarray, np.ndarray, list[float | None], list[float | None]]:
        """Document numbers, fused scores and each side's score of the `k` best, best first (`found`: the dense
        hits in dense mode, the dense side's proposed document numbers in hybrid mode; `whole`: every document's
        dense scores when the batch read them at once)."""
        if mode is Mode.DENSE:
            docs = np.asarray([self.numbers[i] for i, _ in found], dtype=np.int64)
            scores = np.asarray([s for _, s in found], dtype=np.float64)
            return docs, scores, list(scores), [None] * len(docs)
        assert self.lexical is not None  # `mode` checked it
        if mode is Mode.LEXICAL or query is None:
            all_lexical = self.lexical.scores(text)
            docs = top(all_lexical, k)
            docs = docs[all_lexical[docs] > 0]  # a document without any query term is not found by BM25
            return docs, all_lexical[docs].astype(np.float64), [None] * len(docs), list(all_lexical[docs])
        assert self.lexical is not None  # `mode` checked it
        sides = self.lexical.side_scores(text, depth)  # (s, n): each BM25 granularity the index holds
        proposed = np.union1d(np.asarray(found, dtype=np.int64), np.concatenate([top(x, depth) for x in sides]))
        sides = self.lexical.side_scores_at(text, sides, proposed)  # an engine's side: exact on every proposal
        dense = self.dense_scores(query, proposed) if whole is None else whole.numpy()[proposed].astype(np.float64)
        fused = fuse(dense, sides[:, proposed].astype(np.float64), fusion)
        best = np.argsort(-fused, kind="stable")[:k]
        return proposed[best], fused[best], list(dense[best]), list(sides[-1, proposed[best]])

    def _rescored(
        self,
        docs: np.ndarray,
        fused: np.ndarray,
        dense: list[float | None],
        lexical: list[float | None],
        query: np.ndarray,
        k: int,
        dense_query: torch.Tensor | None = None,
        cosines: torch.Tensor | None = None,
    ) -> tuple[np.ndarray, np.ndarray, list[float | None], list[float | None], list[float | None]]:
        """The hybrid's ranked documents rescored by the token side (`TokenStage.rescore`; around each document's
        best windows for `dense_query` when the stage asks, read from `cosines`, every window's, when the whole
        scan kept them), each side's score kept."""
        assert self.tokens is not None

        kept = None if cosines is None else cosines.numpy()
        offsets = self.store.offsets

        def spans(doc: int) -> np.ndarray:
            assert self.lexical is not None  # a hybrid search: there
            return self.lexical.passages(np.arange(int(offsets[doc]), int(offsets[doc + 1])))

        def windows(chosen: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
            assert self.tokens is not None and dense_query is not None  # a hybrid search: there
            if kept is not None:  # every document's best windows at once
                rows, places = best_rows(kept, offsets, chosen, count)
            else:
                rows, places = self.best_rows_read(chosen, dense_query, count)
            return self.tokens.window_tokens(rows, offsets, spans), places

        near = None if dense_query is None or self.lexical is None else windows
        found, scores, tokens = self.tokens.rescore(docs, fused, query, k, near)
        where = {int(d): n for n, d in enumerate(docs)}
        places = [where[int(d)] for d in found]
        read = [None if np.isnan(t) else float(t) for t in tokens]  # NaN: a document below the depth, not rescored
        return found, scores, [dense[n] for n in places], [lexical[n] for n in places], read

    def _matched(self, doc: int, query: np.ndarray) -> Passage | None:
        """The token stage's passage of document `doc` for a query's token vectors `query`: the span of
        `TOKEN_PASSAGE` tokens where its best-matched tokens gather, with the window it starts in (None without
        the text)."""
        from lengthwise.search.tokens import TOKEN_PASSAGE

        if self.tokens is None or self.lexical is None:
            return None
        start, end, score = self.tokens.side.passage(query, int(self.tokens.rows[doc]), tokens=TOKEN_PASSAGE)
        first, last = int(self.store.offsets[doc]), int(self.store.offsets[doc + 1])
        starts = self.lexical.passages(np.arange(first, last))[:, 0]
        window = max(int(np.searchsorted(starts, start, side="right")) - 1, 0)
        return Passage(window, start, end, score, self.lexical.text(doc)[start:end])

    def dense_scores(self, query: torch.Tensor, docs: np.ndarray) -> np.ndarray:
        """Exact dense scores of documents `docs` (every window, fp32), as float64."""
        return self.store.document_scores(query, docs, self.scoring).astype(np.float64)

    def _hit(
        self,
        doc: int,
        score: float,
        dense: float | None,
        lexical: float | None,
        query: torch.Tensor | None,
        text: str,
        count: int,
    ) -> Hit:
        def clean(value: float | None) -> float | None:
            return None if value is None else float(value)

        found = self._passages(doc, query, text, count) if count else ()
        return Hit(self.store.doc_ids[doc], float(score), clean(dense), clean(lexical), found)

    def best_rows_read(self, docs: np.ndarray, query: torch.Tensor, count: int) -> tuple[np.ndarray, np.ndarray]:
        """`best_rows` of documents `docs` for the unit `query` where no whole scan kept the cosines: their windows'
        vectors read in one call (`WindowStore.rows_vectors`), scored by `row_products` (the whole scan's product),
        each document's `count` best picked at once; (rows, places in `docs`), a place's rows ascending and
        together, places ascending."""
        order = np.argsort(docs, kind="stable")  # the rows ascending: one read of the store
        ordered = docs[order]
        offsets = self.store.offsets
        sizes = offsets[ordered + 1] - offsets[ordered]
        local = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        vectors = torch.as_tensor(self.store.rows_vectors(window_rows(offsets, ordered)))
        cosines = row_products(query[None, :], vectors)[0].numpy()
        found, at = best_rows(cosines, local, np.arange(len(ordered)), count)
        rows, places = offsets[ordered[at]] + found - local[at], order[at]
        regrouped = np.argsort(places, kind="stable")  # each place's rows stay ascending
        return rows[regrouped], places[regrouped]

    def _passages(self, doc: int, query: torch.Tensor | None, text: str, count: int) -> tuple[Passage, ...]:
        """The document's `count` best windows: by their dense cosine with the query, else by the query terms
        they hold (lexical mode)."""
        if self.lexical is None:
            raise SettingError("passages", count, "the index holds no text to cut passages from; build it with text")
        first, last = int(self.store.offsets[doc]), int(self.store.offsets[doc + 1])
        body = self.lexical.text(doc)
        spans = [self.lexical.passage(row) for row in range(first, last)]
        if query is not None:
            vectors = torch.as_tensor(np.array(self.store.window_vectors(first, last)))  # stored unit
            scores = (vectors @ query).double().numpy()
        else:
            terms = set(self.lexical.query_tokens(text))
            scores = np.asarray([self._term_score(body[s:e], terms) for s, e in spans])
        best = np.argsort(-scores, kind="stable")[:count]
        return tuple(Passage(int(w), spans[w][0], spans[w][1], float(scores[w]), body[spans[w][0] : spans[w][1]])
                     for w in best)  # fmt: skip

    def _term_score(self, window: str, terms: set[int]) -> float:
        """A window's lexical evidence: Σ log(1 + count) over the query's terms it holds."""
        assert self.lexical is not None
        held = self.lexical.query_tokens(window)
        return sum(math.log1p(held.count(t)) for t in terms)


def _checked(queries: str | Sequence[str], k: int, passages: int, *counts: int | None) -> list[str]:
    """The queries as a list, once `search`'s numbers and texts are checked (a `SettingError` naming the first
    wrong one)."""
    names = ("candidates", "probes", "depth", "search_threads")
    for name, value in (("k", k), *zip(names, counts, strict=True)):
        if value is not None and value < 1:
            raise SettingError(name, value, "must be ≥ 1")
    if passages < 0:
        raise SettingError("passages", passages, "must be ≥ 0")
    texts = [queries] if isinstance(queries, str) else list(queries)
    if not texts or any(not text.strip() for text in texts):
        raise SettingError("query", queries, "a query is empty; give the text to search for")
    return texts
