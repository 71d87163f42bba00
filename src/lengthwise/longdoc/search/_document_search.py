"""What every window index shares, whichever engine holds its windows: the text-query core.

`DocumentSearch` is the base of the local index (`lengthwise.longdoc.search.index.LongIndex`, USearch or FAISS on
files) and of the engine-held one (`lengthwise.longdoc.search._backend_milvus.MilvusIndex`). A subclass says where the
windows are: it proposes documents for query vectors (`proposals`), ranks them (`search_vectors`), scores any
documents exactly on all their windows (`document_scores`) and holds the lexical side (`lexical`). This base does the
rest, once for both: the query model loaded as recorded and checked (`embed_queries`), the search mode and fusion the
index records, the checks of a search's arguments and `search` itself through `lengthwise.longdoc.search.hybrid`, and
the check that a corpus is the one the index holds (`check_corpus`). A document therefore scores the same whichever
backend serves it.

Calls run one way: `index` (building, opening, tuning the local index) → `_dense` (its files and dense search) →
this module; the Milvus backend → this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.core.scoring import WindowScoring

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.longdoc.search.hybrid import FusionSettings, Hit, Mode

__all__ = [
    "QUERY_MODEL_KEYS",
    "RESCORED",
    "RESCORED_AT_LEAST",
    "DocumentSearch",
    "check_query_model",
    "given_name",
]

# what of the query model's fingerprint an index records and checks: the weights (their hash covers the precision's
# cast) and a TempScale set by hooks, which leaves the weights alone but changes every vector
QUERY_MODEL_KEYS = ("weights_sha256_16", "tempscale")
RESCORED, RESCORED_AT_LEAST = 10, 100  # documents scored on all their windows: per document asked for, at least


class DocumentSearch:
    """Document search over a corpus's window vectors, its text beside them (see the module docstring).

    A subclass sets `settings` (the index's record: ``model``, ``encode_settings``, …), `doc_ids`, `model` and
    `load_model`, and implements `search_vectors`, `proposals`, `document_scores`, `lexical` and `_without_text`.
    """

    settings: dict[str, Any]
    doc_ids: list[str]
    model: SentenceTransformer | None
    load_model: ModelLoader | None
    query_precision: str | None = None  # what queries are embedded at when asked otherwise (`set_query_precision`)

    # --- where the windows are: each backend's own --------------------------------------------------------------

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
        """The `k` best (id, exact score) per query row, best first."""
        raise NotImplementedError

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
        raise NotImplementedError

    def document_scores(self, query: torch.Tensor, docs: np.ndarray, scoring: WindowScoring | int) -> np.ndarray:
        """Exact fp32 scores of the documents numbered `docs` for one unit `query`, over every window of each."""
        raise NotImplementedError

    def whole_scans(
        self, units: torch.Tensor, scoring: WindowScoring | int, count: int, search_threads: int | None = None
    ) -> list[torch.Tensor | None]:
        """Per unit query row, every document's exact scores (n,) when read for the whole batch at once, or None (a
        backend that scores each query's documents on their own: this default)."""
        return [None] * len(units)

    def default_candidates(self) -> int:
        """Candidate windows per dense query when none are asked for."""
        raise NotImplementedError

    def _scan(self, units: torch.Tensor, scoring: WindowScoring | int) -> torch.Tensor:
        """(Q, n) exact scores of every document for unit queries, over every window (checks and evaluation)."""
        raise NotImplementedError

    @property
    def lexical(self) -> Any:
        """The lexical side (BM25 over the windows or documents), or None when the index holds no text."""
        raise NotImplementedError

    def _without_text(self) -> str:
        """The refusal of a lexical or hybrid search on an index without text: what it is and the fix."""
        raise NotImplementedError

    # --- the shared core ----------------------------------------------------------------------------------------

    @property
    def numbers(self) -> dict[str, int]:
        """Each document id's number (its place in `doc_ids`), built on first use."""
        if "_numbers" not in self.__dict__:
            self.__dict__["_numbers"] = {doc_id: n for n, doc_id in enumerate(self.doc_ids)}
        return self.__dict__["_numbers"]

    @property
    def scoring(self) -> WindowScoring:
        """How a document scores from its windows, as it was encoded (max or top-k mean, fused with the mean)."""
        from lengthwise.longdoc.config import LongDocConfig

        return LongDocConfig.from_dict(self.settings["encode_settings"]["long"]).scoring

    @property
    def fusion(self) -> FusionSettings:
        """The hybrid fusion settings recorded in the index (`FusionSettings`; the defaults before any tuning)."""
        from lengthwise.longdoc.search.hybrid import FusionSettings

        return FusionSettings.recorded(self.lexical)

    def search_mode(self, mode: str | None = None) -> Mode:
        """The search `mode` asked for (``dense``, ``lexical`` or ``hybrid``), checked against what the index holds;
        None: the mode recorded by a tuning, else hybrid when the index holds text, else dense."""
        from lengthwise.longdoc.search.hybrid import pick_mode

        return pick_mode(mode, self.lexical, self._without_text())

    def _load(self, made: dict[str, Any]) -> SentenceTransformer:
        """The model `made` names, loaded at its recorded precision by this index's loader."""
        from lengthwise.core.models import load_plain_model

        loader = self.load_model or load_plain_model
        return loader(made["model"], precision=made.get("precision", "fp32"))

    def _check_model(self, model: SentenceTransformer, given: str | None = None) -> None:
        """`check_query_model` on `model`: the recorded one loaded by this index, or one `given` in its place."""
        check_query_model(self.settings["model"], model, given=given, precision=self.recorded_precision,
                          as_saved=self.load_model is not None)  # fmt: skip

    def embed_queries(self, queries: Sequence[str], batch_size: int = 32) -> Any:
        """The queries as the index's documents were made: the recorded model (checked by its weights and
        TempScale) and long-document settings."""
        from lengthwise.longdoc.config import LongDocConfig
        from lengthwise.longdoc.encoder import LongEncoder

        made = self.settings["encode_settings"]
        if self.model is None:
            model = self._load(made)
            self._check_model(model)
            self.model = self._at_query_precision(model)
        encoder = LongEncoder(self.model, LongDocConfig.from_dict(made["long"]))
        return encoder.encode_queries(list(queries), batch_size=batch_size)

    @property
    def recorded_precision(self) -> str:
        """The precision the index's documents were embedded at, as `lengthwise encode` recorded it (fp32 for an
        index built before it was recorded)."""
        return str(self.settings["encode_settings"].get("precision", "fp32"))

    @property
    def queries_embedded_at(self) -> str:
        """The precision queries are embedded at: the one `set_query_precision` asked for, else the recorded one."""
        return self.query_precision or self.recorded_precision

    def set_query_precision(self, precision: str | None) -> None:
        """Embed the queries at `precision` (``auto``, ``fp32``, ``bf16``, ``fp16`` or ``int8``;
        `lengthwise.core.precision`) rather than at the precision the documents were embedded at (None: as
        recorded, the default).

        The query model is loaded as recorded and checked against the index's weights, then cast (bf16, fp16) or
        quantized (int8), as `lengthwise.load_model(precision=)` would load it: a query vector then differs from the
        recorded precision's by what the precision changes (bf16 on all-MiniLM-L6-v2: mean cosine 0.99995 to fp32's,
        docs/benchmarks.md "Half precision"), and the query encoder runs several times faster on a CPU with AMX or
        on a GPU. Only an index embedded in fp32 can change: half or int8 weights do not give back the fp32 ones.
        A model already loaded is copied before it changes, so a model given to `open` is left as it was.

        Raises:
            SettingError: on ``precision``: an unknown name, a precision the query model's device runs slowly or
                not at all (`resolve_precision`), or another precision than recorded for an index not embedded in
                fp32.
        """
        import copy

        from lengthwise.core.precision import Precision, device_type, resolve_precision

        wanted: str | None = None
        if precision is not None:
            recorded = Precision.parse(self.recorded_precision)
            device = None if self.model is None else self.model.device
            concrete = resolve_precision(precision, device)
            if concrete is not recorded and recorded is not Precision.FP32:
                problem = f"the index's documents were embedded in {recorded.value} and its queries can be only so"
                if Precision.parse(precision) is Precision.AUTO:  # what auto meant, or the refusal reads as a riddle
                    problem = f"auto means {concrete.value} on this device ({device_type(device)}); {problem}"
                raise SettingError("precision", precision, f"{problem}; leave it out or give {recorded.value}")
            wanted = None if concrete is recorded else concrete.value
        # the checked model as recorded: the one loaded, or the one kept when a copy of it was changed (None: a
        # model loaded and changed in place, loaded again at the next query)
        as_recorded = self.model if self.query_precision is None else self.__dict__.get("_as_recorded")
        self.query_precision = wanted
        if as_recorded is None or wanted is None:
            self.model = as_recorded
            return
        self.__dict__["_as_recorded"] = as_recorded
        self.model = self._at_query_precision(copy.deepcopy(as_recorded))  # a copy changes, not the model given

    def _at_query_precision(self, model: SentenceTransformer) -> SentenceTransformer:
        """`model`, loaded as recorded and checked, at the query precision asked for (`set_query_precision`)."""
        from lengthwise.core.precision import HALF_DTYPES, Precision, cast_half
        from lengthwise.core.quantize import quantize_int8

        if self.query_precision is None:
            return model
        wanted = Precision.parse(self.query_precision)
        if wanted in HALF_DTYPES:
            return cast_half(model, wanted)
        quantize_int8(model)  # set_query_precision let through nothing else
        return model

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
            vectors: The queries' vectors when already embedded (`embed_queries`; e.g. by a service that embeds
                the next batch while this one is searched); embedded here when None.
            search_threads: Threads the queries are searched on, each query on one (default: one per core less one,
                1–32; `lengthwise.core.parallel`). The candidate windows of all queries come from one engine call;
                the hits are the same whatever the number of threads.
        """
        from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

        texts = self._checked(queries, k, passages, candidates, probes, depth, search_threads)
        chosen = self.search_mode(mode)
        if chosen is Mode.LEXICAL:
            for text in texts:
                if not self.lexical.query_tokens(text):
                    raise SettingError("query", text, "holds no word the documents hold (stop words only, or "
                                       "unknown words): nothing to search lexically; use dense or hybrid")  # fmt: skip
            vectors = None
        elif vectors is None:
            vectors = self.embed_queries(texts)
        elif len(vectors) != len(texts):
            raise SettingError("vectors", len(vectors), f"give one vector per query ({len(texts)})")
        fusion = self.fusion if depth is None else replace(self.fusion, depth=depth)
        searcher = HybridSearch(self, self.lexical, self.scoring, fusion)
        return searcher.search(vectors, texts, k, chosen, passages=passages, candidates=candidates, probes=probes,
                               search_threads=search_threads)  # fmt: skip

    # --- checks against the exact scan (`lengthwise eval --index`) -----------------------------------------------

    def exact_vectors(
        self, queries: np.ndarray, k: int = 10, *, scoring: WindowScoring | int = 1
    ) -> list[list[tuple[str, float]]]:
        """The ranking `search_vectors` approximates, by an exact scan over every window (for checks and benchmarks,
        not for serving)."""
        import torch

        units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries), dtype=torch.float32), dim=-1)
        scores = self._scan(units, scoring).numpy()
        return [[(self.doc_ids[j], float(row[j])) for j in np.argsort(-row, kind="stable")[:k]] for row in scores]

    def ranked_with_exact(self, texts: list[str], k: int, mode: Mode) -> dict[str, list[list[tuple[str, float]]]]:
        """(id, score) rankings of the `k` best documents per query: ``index`` through the index in `mode` (as
        `search` with generous candidates), ``exact`` by the same mode's exact scan of every document."""
        from lengthwise.longdoc.search.hybrid import HybridSearch, Mode

        vectors = None if mode is Mode.LEXICAL else np.asarray(self.embed_queries(texts), dtype=np.float32)
        candidates = max(self.default_candidates(), 10 * k)
        if mode is Mode.DENSE:
            assert vectors is not None
            return {"index": self.search_vectors(vectors, k, scoring=self.scoring, candidates=candidates),
                    "exact": self.exact_vectors(vectors, k, scoring=self.scoring)}  # fmt: skip
        searcher = HybridSearch(self, self.lexical, self.scoring, self.fusion)
        found = searcher.search(vectors, texts, k, mode, candidates=candidates)
        exact = [searcher.exact_ranked(None if vectors is None else vectors[n], text, k, mode)
                 for n, text in enumerate(texts)]  # fmt: skip
        return {"index": [[(hit.id, hit.score) for hit in row] for row in found], "exact": exact}

    @staticmethod
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

    def _name(self) -> str:
        """The index as a refusal names it (its folder, or its URI)."""
        return str(getattr(self, "folder", None) or getattr(self, "uri", type(self).__name__))

    def check_corpus(self, data: str | os.PathLike[str]) -> None:
        """A `SettingError` on ``index`` unless this index holds exactly the documents of the corpus at `data` (a
        corpus file or a BEIR folder): the same ids, and the same texts by the digest `lengthwise encode` recorded
        (the same ids with other texts would score as if they were it). The one check of a corpus scored through
        an index (`lengthwise eval --index`, `lengthwise index tune`)."""
        from lengthwise.longdoc.storage.encode import corpus_file
        from lengthwise.longdoc.storage.store import TEXTS, corpus_digests, texts_sha256

        recorded, name = self.settings["encode_settings"].get(TEXTS), self._name()
        if recorded is None:
            raise SettingError("index", name, "records no digest of the texts it holds (built by an older "
                               f"lengthwise, or from an unfinished encode), so it cannot be checked against {data}; "
                               "encode the corpus and build the index again")  # fmt: skip
        digests = corpus_digests(corpus_file(Path(data)))
        missing, extra = len(set(self.doc_ids) - digests.keys()), len(digests.keys() - set(self.doc_ids))
        if missing or extra:
            raise SettingError("index", name, f"holds {len(self.doc_ids)} documents and {data} {len(digests)}: "
                               f"{missing} indexed are not in {data}, {extra} of {data} are not indexed; build the "
                               "index from this corpus")  # fmt: skip
        if texts_sha256(digests) != recorded:
            raise SettingError("index", name, f"holds the ids of {data} with other texts (it was built from another "
                               "version of the corpus); build the index from this corpus")  # fmt: skip


def check_query_model(
    recorded: dict[str, Any],
    model: SentenceTransformer,
    *,
    given: str | None = None,
    precision: str = "fp32",
    as_saved: bool = False,
) -> None:
    """Refuse a query model that would embed queries otherwise than an index's documents (`SettingError` naming the
    model): other weights than `recorded` (an index's ``model`` settings; the hash covers the precision's cast), or
    another TempScale than the build recorded (one set by hooks leaves the weights alone). An index built before the
    TempScale was recorded is checked by its weights only.

    Args:
        recorded: The index's ``model`` settings.
        model: The query model loaded.
        given: The model's name when it was given in place of the recorded one (named in the refusal); None: the
            recorded model, loaded by the index.
        precision: What the index's documents were embedded at (a model computing in another is refused as such).
        as_saved: Whether the index loaded the recorded model as saved (`lengthwise.load_model`).
    """
    from lengthwise.core.models import model_fingerprint

    fingerprint = model_fingerprint(model, recorded["name"])
    name = given or recorded["name"]
    if fingerprint["weights_sha256_16"] != recorded["weights_sha256_16"]:
        raise SettingError("model", name, _other_weights(recorded, fingerprint, precision))
    if "tempscale" in recorded and fingerprint["tempscale"] != recorded["tempscale"]:
        raise SettingError("model", name, _other_tempscale(recorded, fingerprint, given, as_saved))


def given_name(model: SentenceTransformer) -> str:
    """A loaded model as a refusal names it: the folder or hub id its transformer was loaded from, when it says."""
    config = getattr(getattr(model[0], "auto_model", None), "config", None)
    return str(getattr(config, "_name_or_path", "") or "the model given")


def _other_tempscale(recorded: dict[str, Any], fingerprint: dict[str, Any], given: str | None, as_saved: bool) -> str:
    """Why another TempScale is refused, with the advice that fits how the model came: given in place of the
    recorded one, the recorded one loaded as saved, or loaded plain."""
    built, found = _tempscale(recorded["tempscale"]), _tempscale(fingerprint["tempscale"])
    if given is not None:  # the advice is about which model to give
        return (f"this model has TempScale {found}, the index was built with {built}; give the model the index was "
                f"built with ({recorded['name']}, with its TempScale), or leave the model out to query with it, or "
                "build the index again with this one")  # fmt: skip
    if as_saved:  # the recorded model has another TempScale saved beside it now
        return (f"the index was built with TempScale {built}, and the model now loads with {found} (its saved "
                "TempScale changed since the build); save it back as it was, or build the index again")  # fmt: skip
    return (f"the index was built with TempScale {built}, this model has {found}; load it as saved (open the index "
            "with load_model=lengthwise.load_model), or build the index again")  # fmt: skip


def _other_weights(recorded: dict[str, Any], fingerprint: dict[str, Any], precision: str) -> str:
    """Why other weights are refused: the same model at another precision (say so, and how to query at the index's),
    or other weights."""
    hashes = f"weights {fingerprint['weights_sha256_16']}, the index's {recorded['weights_sha256_16']}"
    found = fingerprint["precision"]
    if found == precision:
        return (f"the index was built with weights {recorded['weights_sha256_16']}, this model has "
                f"{fingerprint['weights_sha256_16']}; query with the model the corpus was encoded with, or build the "
                "index again")  # fmt: skip
    other = (f"; to embed the queries in {found} instead, leave the model out and set the queries' precision "
             f"(set_query_precision('{found}'))" if precision == "fp32" else "")  # fmt: skip
    return (f"this model computes in {found} and the index's documents were embedded in {precision} ({hashes}: the "
            f"hash covers the precision); load it at {precision}, or leave the model out: the index loads its own "
            f"at {precision}{other}")  # fmt: skip


def _tempscale(patch: object) -> str:
    """A recorded TempScale (`lengthwise.core.models.ModelPatch.describe`) in a message: its settings, or none."""
    return "none" if patch is None else json.dumps(patch, sort_keys=True)
