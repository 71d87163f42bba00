"""`LongIndex`: the one index over a corpus `lengthwise encode` wrote: an approximate-nearest-neighbour index of its
window vectors, searched by document, with the documents' text beside it for lexical and hybrid search.

The length-specific part is ours; the engines are not. Candidate windows come from FAISS (IVF over 8-bit scalar
quantized vectors, or IVF over packed sign bits for ``ubinary``) or USearch (HNSW over i8 or b1 vectors), one adapter
each in `lengthwise.longdoc.search._engines`. They are rescored *exactly*, from the fp32 vectors kept memory-mapped in
the index folder (never loaded whole), in two steps: the candidate windows themselves rank their documents, then the
best documents are scored on every window with `lengthwise.core.encoder.multi_vector_scores` (max, or the mean of the
best `top_k` windows) — so a document returned has the same score as in an exact scan, and only those few documents are
read whole. This follows the rescoring scheme of sentence-transformers' ``semantic_search_faiss`` /
``semantic_search_usearch`` (oversample candidates on quantized vectors, rescore them), at document level.

The engine holds each *distinct* window vector once (content-addressed by its exact bytes): a corpus whose documents
share runs of identical text (templates, disclaimers, the filler of a passkey test) has many windows with one
vector, and an HNSW graph over thousands of exact duplicates falls into islands that a search never leaves (issue
33.0: Acc@1 50.4 through the index against 84.4 exact). A candidate vector stands for every window that holds it,
so every document holding it becomes a candidate (up to `EXPANDED_AT_MOST` windows per query).

Folder layout: ``index.json`` (settings, counts, engine, and the generation served) and one folder per generation,
``generation-{id}/``, holding ``vectors.npy`` (W, D) fp32, ``offsets.npy`` (n + 1,) window offsets per document,
``ids.txt`` (document ids, one JSON string per line), ``members.npy`` (W,) and ``member_starts.npy`` (U + 1,) (the
windows of each distinct vector, the engine's key), ``engine.faiss`` or ``engine.usearch`` and the lexical side,
``lexical/`` (`lengthwise.longdoc.search.lexical`). A build is written into a staging folder, so an interrupted build
leaves no half-written index; run again with the same inputs, it resumes from its last engine save
(`lengthwise.longdoc.search._staging`). The lexical side is built in the same staging folder after the dense side (a
rerun keeps a finished dense side and resumes the lexical build after its finished shards). The finished folder
becomes a new generation, served from the moment one rename puts its ``index.json`` in place; an open index reads
only from the generation it opened, which no build removes while it is open
(`lengthwise.longdoc.search._generations`). `LongIndex.search` queries either side or both fused
(`lengthwise.longdoc.search.hybrid`).

The code runs one way, top to bottom: this module (build, open, tune) → `_build` (the staged build) and `_tuning`
(the fusion tuning) → `_dense` (the files and the dense search, `LocalWindows`) →
`_document_search` (the text-query core and the exact comparison every backend shares, `DocumentSearch`; the
Milvus backend's base too).

Text queries are embedded as the documents were: the model and long-document settings recorded in the index, the
model loaded by the `ModelLoader` given to `open` / `build` (`lengthwise.LongIndex` loads it as saved, by
`lengthwise.load_model`, so a TempScale saved with the model applies to queries as it did to the documents).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lengthwise.core.fusion import LEXICAL_GRANULARITY, TUNED_WEIGHTS
from lengthwise.longdoc.search import _build, _tuning
from lengthwise.longdoc.search._dense import LocalWindows
from lengthwise.longdoc.search._document_search import check_query_model, given_name
from lengthwise.longdoc.search._engines import Engine, Quantize
from lengthwise.longdoc.search._generations import hold
from lengthwise.longdoc.search._index_files import Progress, read_settings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from lengthwise.core.models import ModelLoader

__all__ = ["Engine", "LongIndex", "Quantize", "check_query_model"]


class LongIndex(LocalWindows):
    """Document search over the window vectors `lengthwise encode` wrote, on a real ANN engine, with the documents'
    text beside them (see the module docstring). Build with `build`, open with `open`, search with `search`.

    Example:
        >>> LongIndex.build("out/encoded", "out/index", quantize="int8")   # = lengthwise index build …
        >>> hits = LongIndex.open("out/index").search(["who wrote the report?"], k=10)
    """

    @classmethod
    def check_build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
    ) -> dict[str, Any]:
        """Check a build's inputs before anything is loaded or written (`build` and `build_windows` call it before
        the model loads): the settings, the encoded folder's manifest, and `out`. Returns the manifest.

        Raises:
            SettingError: An unknown `quantize` or `engine`; an `out` that is not a folder path, cannot be written, is
                a symbolic link, holds files the index did not write, holds `encoded`, or holds the working directory.
            LongDocError: `encoded` has no readable ``manifest.json``.
        """
        return _build.check_build(encoded, out, quantize=quantize, engine=engine)

    @classmethod
    def build(
        cls,
        encoded: str | os.PathLike[str],
        out: str | os.PathLike[str],
        *,
        quantize: Quantize | str = Quantize.INT8,
        engine: Engine | str = Engine.USEARCH,
        text: str | os.PathLike[str] | None = None,
        granularity: str = LEXICAL_GRANULARITY,
        on_progress: Progress = None,
        on_note: Callable[[str], None] | None = None,
        load_model: ModelLoader | None = None,
    ) -> LongIndex:
        """`lengthwise index build`: index `encoded` into `out`, recording the query model's fingerprint, and the
        documents' text beside it for lexical and hybrid search (`lengthwise.longdoc.search.lexical`).

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
        """
        model = _build.build(encoded, out, quantize=quantize, engine=engine, text=text, granularity=granularity,
                             on_progress=on_progress, on_note=on_note, load_model=load_model)  # fmt: skip
        index = cls.open(out)
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
        extra: dict[str, Any] | None = None,
        on_progress: Progress = None,
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
        _build.build_windows(encoded, out, quantize=quantize, engine=engine, extra=extra, on_progress=on_progress)
        return cls.open(out)

    @classmethod
    def open(
        cls,
        folder: str | os.PathLike[str],
        *,
        model: SentenceTransformer | str | os.PathLike[str] | None = None,
        load_model: ModelLoader | None = None,
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
        """
        folder = Path(folder)
        settings, files, held = hold(folder, read_settings)
        index = cls._open_files(folder, files, settings, load_model)
        index.hold = held
        if isinstance(model, (str, os.PathLike)):
            given: str | None = str(model)
            model = index._load({**settings["encode_settings"], "model": str(model)})
        else:
            given = None if model is None else given_name(model)
        if model is not None:
            index._check_model(model, given=given)
            index.model = model
        return index

    def tune_fusion(
        self,
        texts: list[str],
        score: Callable[[list[list[tuple[str, float]]]], float],
        *,
        weights: Sequence[float] = TUNED_WEIGHTS,
        on_eval: Callable[[str, float], None] | None = None,
        record: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Choose the search mode and fusion that `score` rates best on the queries `texts`, and record it in the
        index when `record` is given (with `record` as the note of what it was tuned on).

        The arms are dense, lexical, RRF, and convex and z-score fusion (the default's rule) at each of `weights`,
        each searched for the 10 best documents per query. A fusion becomes the mode only if its score is above both
        sides'; ties go to the earlier arm (convex before z-score, the lower weight first). `score` rates one arm's
        rankings, (id, score) best first per query (e.g. nDCG@10 against a dev split's qrels,
        `lengthwise.evaluation.objectives.qrels_objective`).

        Returns:
            ``{"scores": {arm: score}, "mode", "fusion"}``.
        """
        return _tuning.tune_fusion(self, texts, score, weights=weights, on_eval=on_eval, record=record)
