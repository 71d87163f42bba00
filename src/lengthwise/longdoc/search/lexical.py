"""The lexical side of a long-document index: BM25 over the documents' own text, and the text itself.

BM25 is the oldest baseline a search user compares with, and on real long documents it still wins or ties against
dense windows (docs/longdoc.md, "Hybrid search"). Its length normalisation (``b``) is another answer to the length
problem this project is about, and it finds names, numbers and rare terms that windows of 32 tokens blur. The
engine is **bm25s** (Lù, 2024, arXiv:2407.03618): BM25 scores precomputed into a sparse matrix at build time, saved as
``.npy`` and memory-mapped at search time, so a query costs the postings of its terms and gives the exact score of
every document (the fusion needs scores of documents the lexical top list does not hold). Text is lower-cased,
split on word characters, English stop words removed and Snowball-stemmed (PyStemmer), as bm25s's README does;
tantivy was measured beside it (`benchmarks/bench_hybrid.py engines`).

A lexical folder (``lexical/`` inside an index) holds:

- ``lexical.json``: the settings (granularity, language, ``k1``, ``b``), the document count and the encode folder's
  digest of the texts;
- ``bm25/``: bm25s's files (the score matrix, its vocabulary, the tokenizer's vocabulary and stop words);
- ``texts.bin`` / ``texts.offsets.npy``: every document's UTF-8 text, back to back, and its byte offsets, so a hit
  can carry its passages without the corpus file;
- ``spans.npy``: (W, 2) the character span of each window row of the dense index, in the document's text.

It is written into a staging folder and renamed into place: a killed build leaves no half index (run it again).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from lengthwise.core.errors import SettingError
from lengthwise.longdoc.config import LongDocError

__all__ = [
    "Granularity",
    "LexicalIndex",
    "build_text_side",
    "char_spans",
    "check_corpus_digest",
    "corpus_texts",
    "document_spans",
    "require_bm25s",
]

LEXICAL = "lexical"  # the folder inside an index
SETTINGS_FILE = "lexical.json"
LANGUAGES = {"english": "en"}  # Snowball stemmer name → bm25s stop-word list
BLOCK = 2_000  # documents tokenized at once when the text side is built


class Granularity(str, Enum):
    """What BM25 ranks: whole documents (BM25's own length normalisation) or the dense index's windows (a document
    scores its best window, passage retrieval)."""

    DOCUMENT = "document"
    WINDOW = "window"


def require_bm25s() -> Any:
    """The bm25s module, or a `SettingError` saying how to install it."""
    try:
        import bm25s
        import Stemmer  # noqa: F401  (PyStemmer: bm25s's stemmer)
    except ImportError:
        raise SettingError("mode", "lexical", "needs bm25s and PyStemmer; pip install 'lengthwise[index]'") from None
    return bm25s


def _tokenizer(language: str) -> Any:
    require_bm25s()
    import Stemmer
    from bm25s.tokenization import Tokenizer

    if language not in LANGUAGES:
        raise SettingError("language", language, f"use one of {', '.join(LANGUAGES)} (the stemmers with stop words)")
    return Tokenizer(stopwords=LANGUAGES[language], stemmer=Stemmer.Stemmer(language))


def char_spans(tokenizer: Any, spans_of: Callable[[list[int]], list[tuple[int, int]]], text: str) -> np.ndarray:
    """The character span of each window of `text`: the windows `spans_of` cuts from the text's content token ids
    (no special tokens, as `LongEncoder` reads it), mapped through the fast tokenizer's offsets."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    offsets = encoded["offset_mapping"]
    spans = spans_of(list(encoded["input_ids"]))
    return np.asarray([(offsets[s][0], offsets[e - 1][1]) for s, e in spans], dtype=np.int64).reshape(-1, 2)


@dataclass
class LexicalIndex:
    """BM25 over an index's documents (or windows), with their text. Build with `build`, open with `open`."""

    folder: Path
    settings: dict[str, Any]
    retriever: Any  # bm25s.BM25, memory-mapped
    tokenizer: Any  # bm25s.tokenization.Tokenizer with the corpus vocabulary
    text_offsets: np.ndarray  # (n + 1,) byte offsets into texts.bin
    texts: np.ndarray  # texts.bin as uint8, memory-mapped
    spans: np.ndarray  # (W, 2) character spans of the dense windows
    window_offsets: np.ndarray  # (n + 1,) each document's first window row

    @classmethod
    def build(
        cls,
        texts: Sequence[str],
        spans: Sequence[np.ndarray],
        out: str | os.PathLike[str],
        *,
        granularity: Granularity | str = Granularity.DOCUMENT,
        language: str = "english",
        k1: float = 1.5,
        b: float = 0.75,
        on_progress: Callable[[int, int], None] | None = None,
        texts_sha256: str | None = None,
    ) -> LexicalIndex:
        """Write the lexical side of an index into `out` (replaced if it exists), through a staging folder.

        Args:
            texts: Every document's text, in the dense index's order.
            spans: Per document, the (k, 2) character spans of its window rows in the dense index.
            out: The lexical folder (``INDEX/lexical``).
            granularity: ``document`` (default) or ``window`` (BM25 over the windows' text; a document scores its
                best window).
            language: The stemmer and stop words (``english``).
            k1, b: BM25's term-frequency saturation and length normalisation (Lucene's defaults in bm25s).
            on_progress: Called with (documents done, documents).
            texts_sha256: The encode folder's digest of the texts (`lengthwise.longdoc.storage.store.TEXTS`), recorded.
        """
        granularity = _granularity(granularity)
        if k1 <= 0 or not 0 <= b <= 1:
            raise SettingError("k1" if k1 <= 0 else "b", k1 if k1 <= 0 else b, "use k1 > 0 and 0 ≤ b ≤ 1")
        if len(texts) != len(spans) or not texts:
            raise LongDocError(
                None, None, f"{len(texts)} texts for {len(spans)} documents; pass one text per indexed document"
            )
        tokenizer, out = _tokenizer(language), Path(out)
        staging = out.with_name(f".{out.name}-building")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            counts = np.asarray([len(s) for s in spans], dtype=np.int64)
            np.save(staging / "spans.npy", np.concatenate([np.asarray(s).reshape(-1, 2) for s in spans]))
            np.save(staging / "windows.offsets.npy", np.concatenate([[0], np.cumsum(counts)]))
            _write_texts(staging, texts)
            units = _units(texts, spans, granularity)
            ids = list(_tokenized(tokenizer, units, len(texts), granularity, counts, on_progress))
            _write_bm25(staging, ids, tokenizer, k1, b)
            settings = {"format": 1, "engine": "bm25s", "granularity": granularity.value, "language": language,
                        "k1": k1, "b": b, "documents": len(texts), "units": len(ids),
                        "texts_sha256": texts_sha256}  # fmt: skip
            (staging / SETTINGS_FILE).write_text(json.dumps(settings, indent=1), encoding="utf-8")
            if out.exists():
                shutil.rmtree(out)
            os.rename(staging, out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls.open(out)

    @classmethod
    def open(cls, folder: str | os.PathLike[str]) -> LexicalIndex:
        """Open a lexical folder (BM25 matrix and texts memory-mapped)."""
        bm25s, folder = require_bm25s(), Path(folder)
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
        return cls(folder, settings, retriever, tokenizer, text_offsets, texts, spans, window_offsets)

    def record(self, **settings: Any) -> None:
        """Record further settings in ``lexical.json`` (atomically): the tuned search mode and fusion."""
        from lengthwise.core.results import write_json_atomic

        self.settings = {**self.settings, **settings}
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
        units = np.asarray(self.retriever.get_scores(terms), dtype=np.float32)
        if self.granularity is Granularity.DOCUMENT:
            return units
        return np.maximum.reduceat(units, self.window_offsets[:-1]) if len(units) else units


def _granularity(value: Any) -> Granularity:
    try:
        return Granularity(value)
    except ValueError:
        raise SettingError("granularity", value, "use document or window") from None


def _write_texts(folder: Path, texts: Sequence[str]) -> None:
    """texts.npy (uint8, every text's UTF-8 back to back) and texts.offsets.npy (byte offsets)."""
    encoded = [text.encode("utf-8") for text in texts]
    offsets = np.concatenate([[0], np.cumsum([len(data) for data in encoded])]).astype(np.int64)
    np.save(folder / "texts.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(folder / "texts.offsets.npy", offsets)


def _units(texts: Sequence[str], spans: Sequence[np.ndarray], granularity: Granularity) -> Iterator[str]:
    """What BM25 indexes: each document's text, or each of its windows' text."""
    for text, doc_spans in zip(texts, spans, strict=True):
        if granularity is Granularity.DOCUMENT:
            yield text
        else:
            yield from (text[start:end] for start, end in np.asarray(doc_spans).reshape(-1, 2))


def _tokenized(
    tokenizer: Any,
    units: Iterator[str],
    documents: int,
    granularity: Granularity,
    counts: np.ndarray,
    on_progress: Callable[[int, int], None] | None,
) -> Iterator[list[int]]:
    """Each unit's token ids (the tokenizer's vocabulary grows as it goes), reporting progress in documents."""
    per_unit = np.ones(documents, dtype=np.int64) if granularity is Granularity.DOCUMENT else counts
    ends = np.cumsum(per_unit)
    done = 0
    for unit, ids in enumerate(tokenizer.streaming_tokenize(units, update_vocab=True)):
        yield list(ids)
        if on_progress is not None and unit + 1 == ends[done]:
            done = int(np.searchsorted(ends, unit + 1, side="right"))
            if done % BLOCK == 0 or done == documents:
                on_progress(done, documents)


def _write_bm25(folder: Path, ids: list[list[int]], tokenizer: Any, k1: float, b: float) -> None:
    import bm25s

    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
    (folder / "bm25").mkdir()
    retriever.save(str(folder / "bm25"), show_progress=False)
    tokenizer.save_vocab(str(folder / "bm25"))
    tokenizer.save_stopwords(str(folder / "bm25"))


def document_spans(encoder: Any, texts: Sequence[str], counts: np.ndarray) -> list[np.ndarray]:
    """Per document, the character spans of its window rows as `encoder` (a `LongEncoder`) cut them: one row per
    window for a multi-vector strategy, one span over the whole read text for a single-vector one. A text that cuts
    into another number of windows than the index holds is not the text that was encoded."""
    from lengthwise.longdoc.config import Strategy

    single = encoder.config.strategy is not Strategy.multi_vector
    out = []
    for n, text in enumerate(texts):
        spans = char_spans(encoder.tokenizer, lambda ids: encoder.spans(ids, "document"), text)
        if single and len(spans):
            spans = np.asarray([[spans[:, 0].min(), spans[:, 1].max()]], dtype=np.int64)
        if len(spans) != counts[n]:
            raise LongDocError(
                None,
                None,
                f"document #{n} cuts into {len(spans)} windows and the index holds {counts[n]}: its "
                "text is not the one that was encoded; pass the corpus the index was encoded "
                "from",
            )
        out.append(spans)
    return out


def check_corpus_digest(
    text: str | os.PathLike[str] | None, recorded_path: str | None, recorded: str | None, granularity: str
) -> Path | None:
    """The corpus to index lexically, checked before any model load: `text` if given (it must exist and, where the
    encode folder recorded a digest of its (id, text) pairs, match it), else the path `encode` recorded when the file
    is still there and matches; None when there is no text to index (the recorded file is gone or changed)."""
    from lengthwise.longdoc.storage.store import corpus_digests, texts_sha256

    _granularity(granularity)
    corpus = Path(text) if text is not None else (Path(recorded_path) if recorded_path else None)
    if corpus is None or not corpus.is_file():
        if text is not None:
            raise LongDocError(
                None, None, f"{text}: no such corpus file; pass the corpus.jsonl the index was encoded from"
            )
        return None
    if recorded is not None and texts_sha256(corpus_digests(corpus)) != recorded:
        if text is None:
            return None  # the recorded corpus changed since: the index is built without text (the caller says so)
        raise LongDocError(
            None,
            None,
            f"{corpus}: its documents are not the ones encoded (ids or text differ from the encode "
            "folder's digest); pass the corpus the folder was encoded from, or encode "
            "this one",
        )
    return corpus


def corpus_texts(corpus: str | os.PathLike[str], doc_ids: Sequence[str], recorded: str | None) -> list[str]:
    """The text of each of `doc_ids` from `corpus`, checked against the index: no document missing or extra and,
    where the encode folder recorded one, the same digest of every (id, text) as when it was encoded."""
    from lengthwise.longdoc.storage.store import corpus_rows, text_digest, texts_sha256

    corpus = Path(corpus)
    if not corpus.is_file():
        raise LongDocError(
            None, None, f"{corpus}: no such corpus file; pass the corpus.jsonl the index was encoded from"
        )
    found = dict(corpus_rows(corpus))
    missing = sum(1 for doc_id in doc_ids if doc_id not in found)
    extra = len(found) - (len(doc_ids) - missing)
    if missing or extra:
        raise LongDocError(
            None,
            None,
            f"{corpus}: {missing} of the index's {len(doc_ids)} documents are missing from it and "
            f"{extra} of its documents are not in the index; pass the corpus the index was encoded "
            "from",
        )
    texts = [found[doc_id] for doc_id in doc_ids]
    if recorded is not None:
        changed = texts_sha256({doc_id: text_digest(text) for doc_id, text in zip(doc_ids, texts, strict=True)})
        if changed != recorded:
            raise LongDocError(
                None,
                None,
                f"{corpus}: the documents' text differs from the text that was encoded (digest "
                f"{changed[:12]}, encoded {recorded[:12]}); pass the corpus the index was encoded "
                "from, or encode this one",
            )
    return texts


def build_text_side(
    windows: Any,
    encoder: Any,
    corpus: str | os.PathLike[str],
    *,
    recorded: str | None = None,
    granularity: Granularity | str = Granularity.DOCUMENT,
    on_progress: Callable[[int, int], None] | None = None,
) -> LexicalIndex:
    """Index the text of a `LongIndex`'s documents beside it (``windows.folder / "lexical"``).

    Args:
        windows: The dense index (`lengthwise.longdoc.search.index.LongIndex`): its document ids and window offsets.
        encoder: The `LongEncoder` the corpus was encoded with: it cuts each text into the index's windows, whose
            character spans become the hits' passages.
        corpus: The corpus file (JSONL or text) the index was encoded from.
        recorded: The encode folder's digest of every (id, text) (`lengthwise.longdoc.storage.store.TEXTS`),
            checked when given.
        granularity: What BM25 ranks: ``document`` or ``window``.
        on_progress: Called with (documents done, documents).
    """
    granularity = _granularity(granularity)
    texts = corpus_texts(corpus, windows.doc_ids, recorded)
    spans = document_spans(encoder, texts, np.diff(windows.offsets))
    return LexicalIndex.build(texts, spans, Path(windows.folder) / LEXICAL, granularity=granularity,
                              on_progress=on_progress, texts_sha256=recorded)  # fmt: skip
