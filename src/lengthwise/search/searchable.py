"""What an index offers a caller on either backend: its text-query surface, forwarded to its `Searcher`.

`LongIndex` (a local folder) and `MilvusIndex` (Milvus) each hold a window store, a lexical side and a query model;
`Searchable` gives both the same methods over them (search, the query model's precision, the exact checks, the
corpus check), so a document scores the same whichever backend serves it. It holds no search logic: every call goes
one way, to `lengthwise.search.searcher`, `lengthwise.search.query_model` or `lengthwise.search.exact`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.search import exact
from lengthwise.search.searcher import Searcher

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.fusion import Mode
    from lengthwise.core.models import ModelLoader
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.search.protocols import LexicalSide, Ranked, WindowMethod, WindowStore
    from lengthwise.search.query_model import QueryModel
    from lengthwise.search.types import FusionSettings, Hit, IndexSettings

__all__ = ["Searchable"]


class Searchable:
    """The text-query surface of an index (see the module docstring). A subclass sets `store`, `queries`,
    `settings` and `name`, and says what its `lexical` side is and why text is missing (`without_text`)."""

    store: WindowStore
    queries: QueryModel
    settings: IndexSettings
    name: str  # the index as a refusal names it (its folder, or its URI)
    method: ClassVar[WindowMethod | None] = None  # the long-document method (bound by the junction)

    @classmethod
    def _method(cls, method: WindowMethod | None) -> WindowMethod:
        """The long-document method given, else the class's (`lengthwise.LongIndex` binds the long-document room's)."""
        chosen = method or cls.method
        if chosen is None:
            raise SettingError("method", None, "an index of the search room needs the long-document method that "
                               "made the windows; use lengthwise.LongIndex or lengthwise.MilvusIndex, or pass "
                               "method=")  # fmt: skip
        return chosen

    @property
    def lexical(self) -> LexicalSide | None:  # overridden: the local folder opens it on first use
        return None

    def without_text(self) -> str:
        """Why a lexical or hybrid search is refused on this index without text: what it is and the fix."""
        return f"{self.name} holds no text; build it again with the corpus, or search dense"

    @property
    def searcher(self) -> Searcher:
        """The search over this index's store, lexical side and query model (made on first use, when the lexical side
        is opened)."""
        if "_searcher" not in self.__dict__:
            self.__dict__["_searcher"] = Searcher(self.store, self.lexical, self.queries, self.scoring,
                                                  self.without_text())  # fmt: skip
        return self.__dict__["_searcher"]

    @property
    def doc_ids(self) -> list[str]:
        return self.store.doc_ids

    @property
    def numbers(self) -> dict[str, int]:
        """Each document id's number (its place in `doc_ids`: the lexical side's `text` takes it)."""
        return self.searcher.numbers

    @property
    def offsets(self) -> np.ndarray:
        """(n + 1,) where each document's windows start."""
        return self.store.offsets

    @property
    def scoring(self) -> WindowScoring:
        """How a document scores from its windows, as it was encoded (max or top-k mean, fused with the mean)."""
        return self.queries.method.scoring(self.settings["encode_settings"]["long"])

    @property
    def fusion(self) -> FusionSettings:
        """The hybrid fusion settings recorded in the index (`FusionSettings`; the defaults before any tuning)."""
        return self.searcher.fusion

    def search_mode(self, mode: str | None = None) -> Mode:
        """The search `mode` asked for (``dense``, ``lexical`` or ``hybrid``), checked against what the index holds;
        None: the mode recorded by a tuning, else hybrid when the index holds text, else dense."""
        return self.searcher.mode(mode)

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
        """The `k` best documents for each query, best first (`Searcher.search`, which says every argument)."""
        return self.searcher.search(queries, k, mode=mode, passages=passages, candidates=candidates, probes=probes,
                                    depth=depth, vectors=vectors, search_threads=search_threads,
                                    tokens=tokens)  # fmt: skip

    def embed_for_search(
        self, queries: Sequence[str], mode: str | None = None
    ) -> tuple[np.ndarray | None, list[np.ndarray] | None]:
        """The queries' vectors and, with the token stage in a hybrid search, their token vectors, from one pass
        (`Searcher.embed_for_search`): what `search(vectors=, tokens=)` takes."""
        return self.searcher.embed_for_search(list(queries), self.searcher.mode(mode))

    def use_tokens(
        self,
        folder: str | os.PathLike[str] | None,
        *,
        weight: float | None = None,
        depth: int | None = None,
        around: int | None = None,
    ) -> None:
        """Rescore a hybrid search's best documents by their tokens (`lengthwise.search.tokens.TokenStage`): the
        token folder `lengthwise encode-tokens` wrote for this index's corpus (None: stop). Its queries are read by
        the folder's own model: the index's query model when the folder was made with it, else the recorded one
        (a ColBERT model, say), loaded and checked against the weights the folder records. `weight` None: the one
        `index tune --tokens` recorded, else `TOKEN_WEIGHT`. `around`: a document scored by the tokens inside its
        `around` best windows only, by the dense cosine (0: every token; None: `TOKEN_AROUND`).

        Raises:
            SettingError: a folder that is not a token folder, whose model now has other weights than it was made
                with, or lacking one of the index's documents; a weight outside [0, 1].
        """
        from lengthwise.core.models import load_token_model, model_fingerprint
        from lengthwise.search.tokens import TOKEN_AROUND, TOKEN_DEPTH, TOKEN_WEIGHT, TokenSide, TokenStage

        if folder is None:
            given = {"token_weight": weight, "token_depth": depth, "token_around": around}
            for name, value in given.items():
                if value is not None:
                    raise SettingError(name, value, "applies to a token stage; give the token folder too (--tokens)")
            self.searcher.tokens = None
            return
        side = TokenSide.open(folder)
        made, settings = side.model.get("weights_sha256_16"), side.settings
        if made == self.queries.recorded.get("weights_sha256_16"):  # the index's own model

            def encode(texts: Sequence[str]) -> list[np.ndarray]:
                return self.queries.tokens(texts, settings)

        else:
            model = load_token_model(settings["model"], colbert=settings.get("colbert"),
                                     precision=settings.get("precision", "fp32"))  # fmt: skip
            found = model_fingerprint(model, settings["model"])["weights_sha256_16"]
            if found != made:
                raise SettingError("tokens", str(folder), f"its tokens were made by {settings['model']} with weights "
                                   f"{made}, which loads with {found} now; encode the tokens again")  # fmt: skip
            method = self.queries.method

            def encode(texts: Sequence[str]) -> list[np.ndarray]:
                return method.query_tokens(model, texts, settings)

        tuned = self.lexical.settings.get("tokens") if self.lexical is not None else None
        chosen = weight if weight is not None else tuned["weight"] if tuned else TOKEN_WEIGHT
        near = TOKEN_AROUND if around is None else around or None  # 0: every token
        self.searcher.tokens = TokenStage.bound(side, self.doc_ids, encode, weight=chosen, depth=depth or TOKEN_DEPTH,
                                                around=near)  # fmt: skip

    @property
    def token_stage(self) -> dict[str, object] | None:
        """The token stage a hybrid search runs (`use_tokens`; its folder, codec, model, weight, depth), or None."""
        return None if self.searcher.tokens is None else self.searcher.tokens.describe()

    def searched_with(self, mode: Mode) -> dict[str, object]:
        """What a search in `mode` runs with, as a record says it: the quantization, the mode, the queries'
        precision, the fusion (hybrid) and the token stage (`token_stage`). A token stage rescores a hybrid search
        only: with another mode it is refused, not left out unsaid."""
        stage = self.token_stage
        if stage is not None and mode.value != "hybrid":
            raise SettingError("tokens", stage["folder"], f"rescores a hybrid search, not a {mode.value} one; rank "
                               "in hybrid mode (--mode hybrid) or leave the tokens out")  # fmt: skip
        return {"quantize": self.settings["quantize"], "mode": mode.value, "query_precision": self.queries_embedded_at,
                **({"fusion": self.fusion.to_dict()} if mode.value == "hybrid" else {}),
                **({"tokens": stage} if stage is not None else {})}  # fmt: skip

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
        """The `k` best (id, exact score) per query vector, by the dense side alone (`WindowStore.search_vectors`)."""
        return self.store.search_vectors(queries, k, scoring=scoring, candidates=candidates, probes=probes,
                                         search_threads=search_threads)  # fmt: skip

    # --- the query model -------------------------------------------------------------------------------------------

    @property
    def model(self) -> SentenceTransformer | None:
        """The query model (None until the first text query loads it)."""
        return self.queries.model

    @model.setter
    def model(self, model: SentenceTransformer | None) -> None:
        self.queries.model = model

    @property
    def load_model(self) -> ModelLoader | None:
        """How the recorded query model is loaded by name (None: the hall's plain load)."""
        return self.queries.load_model

    @load_model.setter
    def load_model(self, load_model: ModelLoader | None) -> None:
        self.queries.load_model = load_model

    @property
    def query_precision(self) -> str | None:
        return self.queries.query_precision

    @property
    def recorded_precision(self) -> str:
        return self.queries.recorded_precision

    @property
    def queries_embedded_at(self) -> str:
        return self.queries.queries_embedded_at

    def embed_queries(self, queries: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """The queries as the index's documents were made (`QueryModel.embed`)."""
        return self.queries.embed(queries, batch_size)

    def set_query_precision(self, precision: str | None) -> None:
        """Embed the queries at `precision` rather than as recorded (`QueryModel.set_query_precision`)."""
        self.queries.set_query_precision(precision)

    # --- checks against the exact scan (`lengthwise eval --index`) -----------------------------------------------

    def exact_vectors(self, queries: np.ndarray, k: int = 10, *, scoring: WindowScoring | int = 1) -> Ranked:
        """The ranking `search_vectors` approximates, by an exact scan over every window (`exact.exact_vectors`)."""
        return exact.exact_vectors(self.store, queries, k, scoring=scoring)

    def ranked_with_exact(self, texts: list[str], k: int, mode: Mode) -> dict[str, Ranked]:
        """``index`` and ``exact`` rankings of the `k` best documents per query (`exact.ranked_with_exact`)."""
        return exact.ranked_with_exact(self.searcher, texts, k, mode)

    def check_corpus(self, data: str | os.PathLike[str]) -> None:
        """Refuse a corpus other than the one this index holds (`exact.check_corpus`)."""
        exact.check_corpus(self.settings, self.doc_ids, data, self.name)
