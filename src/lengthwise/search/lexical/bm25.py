"""The lexical side of an index: BM25 (bm25s) over the documents' own text, at one granularity (`LexicalIndex`) or
both (`BothGranularities`), with the text itself and each window's character span (a hit's passages).

A query costs the postings of its terms and gives every document's exact score (the fusion needs the scores of
documents the lexical top list does not hold). docs/engines.md ("The lexical folder") describes the folder, why
bm25s, and the bounded-memory, resumable build (`lengthwise.search.lexical.shards`, `lengthwise.search.lexical.build`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import cast

import numpy as np

from lengthwise.core.errors import LongDocError, SettingError, enum_member
from lengthwise.core.fusion import DEFAULT_FUSION
from lengthwise.search.lexical import shards as _bm25_build
from lengthwise.search.lexical.bm25s_calls import Bm25Retriever, Bm25Tokenizer
from lengthwise.search.lexical.texts import TextSource, in_memory
from lengthwise.search.local.files import read_settings
from lengthwise.search.local.generations import GENERATION, check_marked, mark, rebuilt
from lengthwise.search.local.staging import aside_of, swap_in
from lengthwise.search.types import Granularity, LexicalSettings

__all__ = ["BothGranularities", "LexicalIndex", "open_lexical", "require_bm25s"]

LEXICAL = "lexical"  # the folder inside an index
DOCUMENT_SIDE = "document"  # inside a lexical folder of granularity both: its whole-document BM25, a lexical folder
SETTINGS_FILE = "lexical.json"
LANGUAGES = {"english": "en"}  # Snowball stemmer name → bm25s stop-word list
LANGUAGE, K1, B = "english", 1.5, 0.75  # the defaults: English, and Lucene's k1 and b as bm25s sets them
# A window query sums its terms' postings alone when they are fewer than the windows / POSTINGS_PATH_SHARE, else it
# scores every window with bm25s and takes each document's best: the crossover measured at 10M windows lies near
# postings = windows / 14 (`python -m benchmarks.search.hybrid text-side --queries`, docs/longdoc.md)
POSTINGS_PATH_SHARE = 16

logger = logging.getLogger(__name__)


def require_bm25s() -> ModuleType:
    """The bm25s module (and PyStemmer, its stemmer), or a `MissingExtra` (a `SettingError`) naming the extra."""
    from lengthwise.core._optional import require

    return require("bm25s", "Stemmer", extra="index", field="mode", value="lexical")


def _tokenizer(language: str) -> Bm25Tokenizer:
    require_bm25s()
    import Stemmer
    from bm25s.tokenization import Tokenizer

    if language not in LANGUAGES:
        raise SettingError("language", language, f"use one of {', '.join(LANGUAGES)} (the stemmers with stop words)")
    return Tokenizer(stopwords=LANGUAGES[language], stemmer=Stemmer.Stemmer(language))


@dataclass
class LexicalIndex:
    """BM25 over an index's documents (or windows), with their text. Build with `build`, open with `open`."""

    folder: Path
    settings: LexicalSettings
    retriever: Bm25Retriever  # bm25s.BM25, memory-mapped
    tokenizer: Bm25Tokenizer  # bm25s's tokenizer with the corpus vocabulary
    text_offsets: np.ndarray  # (n + 1,) byte offsets into texts.npy
    texts: np.ndarray  # texts.npy (uint8), memory-mapped
    spans: np.ndarray  # (W, 2) character spans of the dense windows
    window_offsets: np.ndarray  # (n + 1,) each document's first window row

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        spans: Sequence[np.ndarray],
        out: str | os.PathLike[str],
        *,
        granularity: Granularity | str = Granularity.WINDOW,
        language: str = LANGUAGE,
        k1: float = K1,
        b: float = B,
        on_progress: Callable[[int, int], None] | None = None,
        texts_sha256: str | None = None,
    ) -> LexicalIndex | BothGranularities:
        """Write the lexical side of an index into `out` (replaced if it exists), through a staging folder.

        The build runs in shards and keeps the finished ones when interrupted: run again with the same inputs, it
        resumes after them; with other inputs or settings it starts afresh (logged). Its memory beyond the inputs is
        the vocabulary, one shard and a few numbers per document, whatever the corpus's size (the module's docstring
        says how); the files are the ones bm25s's in-memory ``BM25.index`` and ``save`` write, to the bit.
        `build_text_side` builds from the corpus file instead, without holding the texts.

        Args:
            texts: Every document's text, in the dense index's order.
            spans: Per document, the (k, 2) character spans of its window rows in the dense index.
            out: The lexical folder (``INDEX/lexical``).
            granularity: ``window`` (the default here: BM25 over the windows' text, a document scores its best
                window), ``document`` (whole texts) or ``both`` (the two, `BothGranularities`; an index's default).
            language: The stemmer and stop words (``english``).
            k1, b: BM25's term-frequency saturation and length normalisation (Lucene's defaults in bm25s).
            on_progress: Called with (documents done, documents) as they are tokenized.
            texts_sha256: The encode folder's digest of the texts (`lengthwise.longdoc.storage.store.TEXTS`), recorded;
                when given it also names the texts to a resumed build (else a digest of them is computed).
        """
        _checked_settings(granularity, k1, b)
        if len(texts) != len(spans) or not texts:
            raise LongDocError(
                None, None, f"{len(texts)} texts for {len(spans)} documents; pass one text per indexed document"
            )
        return cls._build(in_memory(texts, spans, texts_sha256), out, granularity=granularity, language=language,
                          k1=k1, b=b, on_progress=on_progress, generation=None)  # fmt: skip

    @classmethod
    def _build(
        cls,
        source: TextSource,
        out: str | os.PathLike[str],
        *,
        granularity: Granularity | str,
        language: str,
        k1: float,
        b: float,
        on_progress: Callable[[int, int], None] | None,
        generation: str | None,
    ) -> LexicalIndex | BothGranularities:
        """`build` from a `TextSource`: its texts are written into the staging folder first, then read back a
        shard at a time. `generation`: the index generation the side belongs to (recorded; None outside an
        index)."""
        granularity = _checked_settings(granularity, k1, b)
        if granularity is Granularity.BOTH:  # the window side, then whole documents in a folder inside it
            for side, folder in ((Granularity.WINDOW, Path(out)), (Granularity.DOCUMENT, Path(out) / DOCUMENT_SIDE)):
                cls._build(source, folder, granularity=side, language=language, k1=k1, b=b, on_progress=on_progress,
                           generation=generation)  # fmt: skip
            return open_lexical(out, generation=generation)
        tokenizer, out = _tokenizer(language), Path(out)
        per_document = source.counts if granularity is Granularity.WINDOW else np.ones_like(source.counts)
        plan = _bm25_build._plan(source, per_document, granularity=granularity, language=language, k1=k1, b=b)
        bounds = _bm25_build._shard_bounds(source.lengths, per_document)
        staging = out.with_name(f".{out.name}-building")
        for folder in (staging, aside_of(out)):  # a folder of either name lengthwise did not make is refused
            check_marked(folder, out)
        done = _bm25_build._resumed(staging, plan, len(bounds) - 1)
        try:
            if done is None:
                staging.mkdir(parents=True)
                mark(staging)
                _bm25_build._start(staging, source.sizes, source.counts)
                source.write(staging / "texts.npy")
                _bm25_build._record(staging, plan, 0)
            whole = granularity is Granularity.DOCUMENT  # BM25 indexes each text whole, else each window's text
            from lengthwise.core.progress import begin_stage  # tqdm: imported by a build only

            begin_stage(on_progress, f"indexing the text by {granularity.value}", "documents")
            _bm25_build._tokenize_shards(staging, tokenizer, source, whole, bounds, done or 0, plan, on_progress)
            _bm25_build._write_bm25(staging, len(bounds) - 1, tokenizer, k1, b)
            tokenizer.reset_vocab()  # saved with the index: freed before the index is opened
            settings = {"format": 1, "engine": "bm25s", "granularity": granularity.value, "language": language,
                        "k1": k1, "b": b, "documents": len(source.sizes), "units": plan["units"],
                        "texts_sha256": source.encoded_sha256}  # fmt: skip
            if generation is not None:  # inside an index: the fusion it searches with until `index tune` records one
                settings[GENERATION], settings["fusion"] = generation, dict(DEFAULT_FUSION)
            (staging / SETTINGS_FILE).write_text(json.dumps(settings, indent=1), encoding="utf-8")
            (staging / _bm25_build.BUILD_STATE).unlink()  # from here a rerun starts afresh: the shards are going
            shutil.rmtree(staging / _bm25_build.SHARDS)
            cls.open(staging, generation=generation)  # the new folder must open before it replaces anything
            swap_in(staging, out)
        except KeyboardInterrupt:
            raise  # the finished shards stay in the staging folder: the same build, run again, resumes after them
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls.open(out, generation=generation)

    @classmethod
    def open(cls, folder: str | os.PathLike[str], *, generation: str | None = None) -> LexicalIndex:
        """Open a lexical folder (BM25 matrix and texts memory-mapped).

        Args:
            folder: The folder (``lexical/`` in an index generation, or one `build` wrote).
            generation: The index generation the dense side was opened from: the folder must belong to it (a
                `LongDocError` saying the index was rebuilt when it is gone or belongs to another).
        """
        bm25s, folder = require_bm25s(), Path(folder)
        if generation is not None and not folder.parent.is_dir():
            raise rebuilt(folder.parent.parent, generation)
        if not (folder / SETTINGS_FILE).is_file():
            raise LongDocError(
                None, None, f"{folder}: no {SETTINGS_FILE}; the index was built without its documents' text"
            )
        try:
            settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
            retriever = bm25s.BM25.load(str(folder / "bm25"), mmap=True, show_progress=False)
            tokenizer = _tokenizer(settings["language"])
            tokenizer.load_vocab(str(folder / "bm25"))
            text_offsets = np.load(folder / "texts.offsets.npy", allow_pickle=False)
            texts = np.load(folder / "texts.npy", mmap_mode="r", allow_pickle=False)
            spans = np.load(folder / "spans.npy", mmap_mode="r", allow_pickle=False)
            window_offsets = np.load(folder / "windows.offsets.npy", allow_pickle=False)
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as error:
            raise LongDocError(
                None, None, f"{folder}: unreadable lexical index ({error}); build the index again"
            ) from None
        if len(text_offsets) != settings["documents"] + 1 or len(window_offsets) != len(text_offsets):
            raise LongDocError(None, None, f"{folder}: the lexical files disagree in size; build the index again")
        if generation is not None and settings.get(GENERATION) != generation:
            raise LongDocError(None, None, f"{folder}: the lexical side of generation {settings.get(GENERATION)}, "
                               f"not of the index's {generation}; build the index again")  # fmt: skip
        return cls(folder, settings, retriever, tokenizer, text_offsets, texts, spans, window_offsets)

    def record(self, **settings: object) -> None:
        """Record further settings in ``lexical.json`` (atomically): the tuned search mode and fusion. Inside an
        index, only while its generation is the one served: a `LongDocError` says the index was rebuilt since it
        was opened (what is recorded would be lost with the old generation)."""
        from lengthwise.core.results import write_json_atomic

        generation = self.settings.get(GENERATION)
        if generation is not None and read_settings(self.folder.parent.parent)[GENERATION] != generation:
            raise rebuilt(self.folder.parent.parent, generation)
        self.settings = cast("LexicalSettings", {**self.settings, **settings})  # keys of LexicalSettings
        write_json_atomic(self.folder / SETTINGS_FILE, self.settings)

    @property
    def granularity(self) -> Granularity:
        return Granularity(self.settings["granularity"])

    def text(self, doc: int) -> str:
        """Document number `doc`'s text."""
        return bytes(self.texts[self.text_offsets[doc] : self.text_offsets[doc + 1]]).decode("utf-8")

    def passage(self, row: int) -> tuple[int, int]:
        """The character span of window row `row` (a row of the dense index's vectors)."""
        start, end = self.spans[row]
        return int(start), int(end)

    def passages(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), 2) int64: the character spans of window `rows`, one read."""
        return np.asarray(self.spans[np.asarray(rows, dtype=np.int64)], dtype=np.int64).reshape(-1, 2)

    def query_tokens(self, query: str) -> list[int]:
        """The query's terms known to the corpus (stop words and unknown words dropped)."""
        ids = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        empty = self.tokenizer.get_vocab_dict().get("")  # bm25s's placeholder for a text with no term
        return [int(i) for i in ids if i != empty]

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every document for `query` (a window granularity gives each document its best
        window); all zeros when the query has no known term."""
        terms = self.query_tokens(query)
        documents = self.settings["documents"]
        if not terms:
            return np.zeros(documents, dtype=np.float32)
        if self.granularity is Granularity.DOCUMENT:
            return np.asarray(self.retriever.get_scores(terms), dtype=np.float32)
        indptr = self.retriever.scores["indptr"]
        bounds = [(int(indptr[t]), int(indptr[t + 1])) for t in terms]  # each term's postings
        few = sum(b - a for a, b in bounds) * POSTINGS_PATH_SHARE < len(self.spans)  # windows
        if few and self.retriever.nonoccurrence_array is None:
            return self._best_windows(bounds)
        units = np.asarray(self.retriever.get_scores(terms), dtype=np.float32)
        return np.maximum.reduceat(units, self.window_offsets[:-1]) if len(units) else units

    def side_scores(self, query: str, depth: int | None = None) -> np.ndarray:
        """(1, n): every document's score for `query` (all exact, whatever `depth`): this one granularity's side."""
        return self.scores(query)[None]

    def side_scores_at(self, query: str, sides: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """`sides` as they are: every score of a local side is exact already."""
        return sides

    @functools.cached_property
    def _window_document(self) -> np.ndarray:
        """(W,) the document of each window row (int32: 4 bytes a window, made at the first window query)."""
        return np.repeat(np.arange(self.settings["documents"], dtype=np.int32), np.diff(self.window_offsets))

    def _best_windows(self, bounds: list[tuple[int, int]]) -> np.ndarray:
        """Each document's best window score from the query terms' postings alone (`scores`' path when they are
        few): the windows they touch are summed term by term in the query's order, as bm25s's `get_scores` sums
        them (so the scores agree to the bit), then each document keeps its highest. `bounds`: each query term's
        postings, in the query's order."""
        scores = self.retriever.scores
        rows = np.concatenate([scores["indices"][a:b] for a, b in bounds])
        values = np.concatenate([scores["data"][a:b] for a, b in bounds]).astype(np.float32, copy=False)
        order = np.argsort(rows, kind="stable")  # each term's postings are sorted: a merge of sorted runs
        ordered = rows[order]
        first = np.empty(len(rows), dtype=bool)
        first[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
        slot = np.empty(len(rows), dtype=np.intp)
        slot[order] = np.cumsum(first) - 1  # each posting's place among the distinct windows
        sums = np.zeros(int(first.sum()), dtype=np.float32)
        start = 0
        for a, b in bounds:  # one term at a time: a window appears once per term, so no index repeats
            sums[slot[start : start + b - a]] += values[start : start + b - a]
            start += b - a
        best = np.zeros(self.settings["documents"], dtype=np.float32)  # BM25 scores are positive: 0 = no term
        np.maximum.at(best, self._window_document[ordered[first]], sums)
        return best


def _granularity(value: str | Granularity) -> Granularity:
    return enum_member(Granularity, "granularity", value)


def _checked_settings(granularity: str | Granularity, k1: float, b: float) -> Granularity:
    """The granularity, once it and BM25's parameters are checked (`SettingError` naming the one that is not)."""
    if k1 <= 0 or not 0 <= b <= 1:
        raise SettingError("k1" if k1 <= 0 else "b", k1 if k1 <= 0 else b, "use k1 > 0 and 0 ≤ b ≤ 1")
    return _granularity(granularity)


@dataclass
class BothGranularities:
    """BM25 at both granularities (`Granularity.BOTH`): the window side (`window`, whose folder is the index's lexical
    folder: the texts, the spans, the recorded settings) and whole documents (`document`, a lexical folder inside
    it). A hybrid search fuses the dense side with both (`side_scores`), each with half the lexical weight; a lexical
    search, passages and the recorded settings are the window side's."""

    window: LexicalIndex
    document: LexicalIndex

    @property
    def folder(self) -> Path:
        """The window side's folder: the index's lexical folder."""
        return self.window.folder

    def text(self, doc: int) -> str:
        return self.window.text(doc)

    def passage(self, row: int) -> tuple[int, int]:
        return self.window.passage(row)

    def passages(self, rows: np.ndarray) -> np.ndarray:
        return self.window.passages(rows)

    def query_tokens(self, query: str) -> list[int]:
        return self.window.query_tokens(query)

    def scores(self, query: str) -> np.ndarray:
        """A lexical search's scores (and each hit's lexical score): the window side's."""
        return self.window.scores(query)

    @property
    def settings(self) -> LexicalSettings:
        """The window side's settings (the recorded mode and fusion), with the granularity ``both``."""
        return {**self.window.settings, "granularity": Granularity.BOTH.value}

    @property
    def granularity(self) -> Granularity:
        return Granularity.BOTH

    def record(self, **settings: object) -> None:
        """Record further settings (the tuned mode and fusion) in the window side's ``lexical.json``."""
        self.window.record(**settings)

    def side_scores(self, query: str, depth: int | None = None) -> np.ndarray:
        """(2, n): every document's whole-document BM25 score, then its best window's (every one exact, whatever the
        `depth` a hybrid search asks to be right: `side_scores`)."""
        return np.stack([self.document.scores(query), self.window.scores(query)])

    def side_scores_at(self, query: str, sides: np.ndarray, docs: np.ndarray) -> np.ndarray:
        """`sides` as they are: every score of a local side is exact already."""
        return sides


def open_lexical(folder: str | os.PathLike[str], *, generation: str | None = None) -> LexicalIndex | BothGranularities:
    """The lexical side in `folder`: one `LexicalIndex`, or `BothGranularities` when a whole-document side sits
    inside it (`LexicalIndex.open` says what is checked)."""
    window = LexicalIndex.open(folder, generation=generation)
    if not (Path(folder) / DOCUMENT_SIDE / SETTINGS_FILE).is_file():
        return window
    return BothGranularities(window, LexicalIndex.open(Path(folder) / DOCUMENT_SIDE, generation=generation))
