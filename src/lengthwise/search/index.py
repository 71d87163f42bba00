"""`LongIndex`: the index folder `lengthwise index build` writes over an encoded corpus: an ANN engine over its window
vectors, searched by document and rescored exactly, with the documents' text beside it for lexical and hybrid search.

It builds (`lengthwise.search.local.build`: staged, resumable, one new generation), opens (a generation held while
open) and tunes (`lengthwise.search.tuning`); a search runs through `Searchable` → `Searcher` over the folder's
`LocalWindows` and its lexical side. docs/engines.md ("The index folder") describes the engines, the exact rescoring,
the distinct-vector keys and the folder's files.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import LEXICAL_GRANULARITY, TUNED_WEIGHTS
from lengthwise.search import tuning
from lengthwise.search.lexical.bm25 import LEXICAL, SETTINGS_FILE, BothGranularities, LexicalIndex, open_lexical
from lengthwise.search.local import build as local_build
from lengthwise.search.local.files import Progress, read_settings
from lengthwise.search.local.generations import GENERATION, Hold, hold, rebuilt
from lengthwise.search.local.windows import LocalWindows
from lengthwise.search.query_model import QueryModel, given_name
from lengthwise.search.searchable import Searchable
from lengthwise.search.types import EncodedManifest, Engine, Granularity, IndexSettings, Quantize, TokenChoice

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader
    from lengthwise.search.protocols import WindowMethod

__all__ = ["LongIndex"]


@dataclass(eq=False, repr=False)
class LongIndex(Searchable):
    """Document search over the window vectors `lengthwise encode` wrote, on a real ANN engine, with the documents'
    text beside them (see the module docstring). Build with `build`, open with `open`, search with `search`.

    It holds the folder's window store (`windows`, a `LocalWindows`), its lexical side (`lexical`, opened on first
    use) and its query model (`queries`); `Searchable` gives the search over them.

    Example:
        >>> LongIndex.build("out/encoded", "out/index", quantize="int8")   # = lengthwise index build …
        >>> hits = LongIndex.open("out/index").search(["who wrote the report?"], k=10)
    """

    windows: LocalWindows
    queries: QueryModel
    hold: Hold | None = None  # the reader's hold on its generation: no build removes it while the index is open

    @property
    def store(self) -> LocalWindows:  # type: ignore[override]
        return self.windows

    @property
    def folder(self) -> Path:
        return self.windows.folder

    @property
    def settings(self) -> IndexSettings:  # type: ignore[override]
        """The index's record (``index.json``): its counts, engine, model and encode settings."""
        return self.windows.settings

    @property
    def name(self) -> str:  # type: ignore[override]
        return str(self.windows.folder)

    @property
    def vectors(self) -> np.ndarray:
        """(W, D) fp32 unit window vectors, memory-mapped."""
        return self.windows.vectors

    @property
    def files(self) -> Path | None:
        return self.windows.files

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.folder)!r})"

    @property
    def replaced(self) -> bool:
        """Whether a later build of the folder serves another generation now than the one this index answers from
        (a long-lived process, such as a service, opens the folder again to serve it)."""
        return self.windows.replaced

    @property
    def lexical(self) -> LexicalIndex | BothGranularities | None:
        """The index's lexical side (`lengthwise.search.lexical.bm25.LexicalIndex`, or `BothGranularities`), or None
        when built without text."""
        if "_lexical" not in self.__dict__:
            files = Path(self.windows.files or self.folder)  # the generation opened, whatever index.json names now
            if not files.is_dir():
                raise rebuilt(Path(self.folder), self.settings.get(GENERATION, "?"))
            folder, generation = files / LEXICAL, self.settings.get(GENERATION)
            found = (folder / SETTINGS_FILE).is_file()
            self.__dict__["_lexical"] = open_lexical(folder, generation=generation) if found else None
        return self.__dict__["_lexical"]

    def without_text(self) -> str:
        return f"{self.folder} was built without its documents' text; build it again with the corpus, or search dense"

    @classmethod
    def check_build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
    ) -> EncodedManifest:
        """Check a build's inputs before anything is loaded or written (`build` and `build_windows` call it before
        the model loads): the settings, the encoded folder's manifest, and `out`. Returns the manifest.

        Raises:
            SettingError: An unknown `quantize` or `engine`; an `out` that is not a folder path, cannot be written, is
                a symbolic link, holds files the index did not write, holds `encoded`, or holds the working directory.
            LongDocError: `encoded` has no readable ``manifest.json``.
        """
        return local_build.check_build(encoded, out, quantize=quantize, engine=engine)

    @classmethod
    def build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        text: str | os.PathLike[str] | None = None,
        granularity: Granularity | str = LEXICAL_GRANULARITY,
        on_progress: Progress = None,
        on_note: Callable[[str], None] | None = None,
        load_model: ModelLoader | None = None,
        method: WindowMethod | None = None,
    ) -> LongIndex:
        """`lengthwise index build`: index `encoded` into `out`, recording the query model's fingerprint, and the
        documents' text beside it for lexical and hybrid search (`lengthwise.search.lexical.bm25`).

        Both sides are built in one staging folder beside `out` (the lexical side's own staging inside it) and
        become one new generation of `out` together, so an earlier index at `out` is served whole until the new one
        is, and an index opened before keeps answering from its own generation. Interrupted
        (Ctrl-C), the staging stays: the same build run again keeps a finished dense side (or resumes it from its
        last engine save) and resumes the lexical side after its finished shards.

        Args:
            encoded: A folder written by `lengthwise encode`.
            out: The index folder.
            quantize, engine: The dense side's candidate vectors and ANN engine (`build_windows`).
            text: The corpus the folder was encoded from (default: the path `encode` recorded); checked against
                the encoded ids and text digests before anything is built. Without it, and with the recorded file
                gone, the index is dense only (`on_note` says so).
            granularity: What BM25 ranks: ``window`` (the default: the dense windows, a document scoring its best)
                or ``document`` (whole documents).
            on_progress: Called with (windows added, windows) as the engine is filled, then with (documents
                tokenized, documents) as the text is indexed.
            on_note: Told, in one line, when the index is built without text.
            load_model: How the recorded model is loaded (`open`).
            method: The long-document method that made the windows (default: the class's).
        """
        method = cls._method(method)
        model = local_build.build(encoded, out, quantize=quantize, engine=engine, text=text, granularity=granularity,
                                  on_progress=on_progress, on_note=on_note, load_model=load_model,
                                  method=method)  # fmt: skip
        index = cls.open(out, method=method)
        index.model, index.load_model = model, load_model
        return index

    @classmethod
    def build_windows(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        extra: Mapping[str, object] | None = None,
        on_progress: Progress = None,
        method: WindowMethod | None = None,
    ) -> LongIndex:
        """Index the window vectors of the folder `lengthwise encode` wrote (`encoded`) into `out` (new, or an earlier
        index: replaced): the dense side only, no model loaded, no text indexed (`build` does both around this).

        Args:
            encoded: The shard folder; every shard is checked (size and sha256) before anything is indexed.
            out: The index folder; built in a staging folder beside it, opened there, and only then swapped into
                place (an earlier index stays until the new one opens). Checked first (`check_build`).
            quantize: ``int8`` (default), ``ubinary`` or ``none`` for the candidate stage.
            engine: ``usearch`` (HNSW; default: it found ≥ 0.99 of the exact top-100 documents on SciFact at its
                default search expansion) or ``faiss`` (IVF; needs about a quarter of its lists probed for that).
            extra: More settings to record in ``index.json`` (the query model's fingerprint, …).
            on_progress: Called with (distinct vectors added, distinct vectors) as the engine is filled.
        """
        local_build.build_windows(encoded, out, quantize=quantize, engine=engine, extra=extra,
                                  on_progress=on_progress)  # fmt: skip
        return cls.open(out, method=method)

    @classmethod
    def open(
        cls,
        folder: str | os.PathLike[str],
        *,
        model: SentenceTransformer | str | os.PathLike[str] | None = None,
        load_model: ModelLoader | None = None,
        method: WindowMethod | None = None,
    ) -> LongIndex:
        """Open an index folder; the fp32 vectors are memory-mapped, the engine's file loaded (USearch: mapped).

        The index answers from the generation ``index.json`` names as it opens, its lexical side included (opened on
        first use), whatever builds of the same folder run after: no build removes a generation while an index
        holds it open. To serve a newer build, open the folder again.

        Args:
            folder: A folder written by `build` (``lengthwise index build``).
            model: The query model (default: loaded from the recorded name on the first text query): a loaded model,
                or a folder / package / hub id to load in its place (e.g. when the recorded path moved). It must be
                the one the index was built with, checked by its weight hash (`SettingError` otherwise).
            load_model: How the query model is loaded by name (`lengthwise.core.models.ModelLoader`; default
                the plain load; `lengthwise.load_model` re-applies what was saved beside the model).
            method: The long-document method that made the windows (default: the class's).
        """
        folder = Path(folder)
        settings, files, held = hold(folder, read_settings)
        windows = LocalWindows.open_files(folder, files, settings)
        queries = QueryModel(settings.get("model", {}), settings["encode_settings"], cls._method(method), load_model)
        index = cls(windows, queries, held)
        if isinstance(model, (str, os.PathLike)):
            given: str | None = str(model)
            model = queries.load(str(model))
        else:
            given = None if model is None else given_name(model)
        if model is not None:
            queries.check(model, given=given)
            queries.model = model
        return index

    def tune_fusion(
        self,
        texts: list[str],
        score: Callable[[list[list[tuple[str, float]]]], float],
        *,
        weights: Sequence[float] = TUNED_WEIGHTS,
        on_eval: Callable[[str, float], None] | None = None,
        record: Mapping[str, object] | None = None,
        tokens: TokenChoice | None = None,
    ) -> dict[str, Any]:
        """Choose the search mode and fusion that `score` rates best on the queries `texts`, and record it in the
        index when `record` is given (with `record` as the note of what it was tuned on). `tokens` (a token folder,
        without a weight: the weight is what is tuned), or a token stage already on (`use_tokens`): the best fusion
        is also rescored by it at each of `tuning.TUNED_TOKEN_WEIGHTS` (`tuning.tune_fusion`).

        The arms are dense, lexical, RRF, and convex and z-score fusion (the default's rule) at each of `weights`,
        each searched for the 10 best documents per query. A fusion becomes the mode only if its score is above both
        sides'; ties go to the earlier arm (convex before z-score, the lower weight first). `score` rates one arm's
        rankings, (id, score) best first per query (e.g. nDCG@10 against a dev split's qrels,
        `lengthwise.evaluation.objectives.qrels_objective`).

        Returns:
            ``{"scores": {arm: score}, "mode", "fusion"}``.
        """
        if tokens is not None and tokens.weight is not None:
            raise SettingError("token_weight", tokens.weight, "is what a tuning with tokens chooses; leave it out")
        if tokens is not None:
            tokens.apply(self)
        return tuning.tune_fusion(self.searcher, self.lexical, self.name, texts, score, weights=weights,
                                  on_eval=on_eval, record=record)  # fmt: skip
