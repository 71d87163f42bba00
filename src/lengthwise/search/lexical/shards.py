"""The lexical side's streaming build (`lengthwise.search.lexical.bm25`'s docstring says how it works): pass 1
tokenizes shards of units and saves their postings, pass 2 assembles bm25s's score matrix from them, memory-mapped;
each step records its progress in the staging folder, so a killed build resumes after its finished shards.
`LexicalIndex._build` drives these steps; they log as the lexical module does.
"""

from __future__ import annotations

import json
import logging
import shutil
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import Enum
from pathlib import Path

import numpy as np

from lengthwise.search.lexical.bm25s_calls import Bm25Tokenizer
from lengthwise.search.lexical.texts import TextSource, read_texts

BLOCK = 2_000  # progress is reported every BLOCK documents tokenized
SHARD_UNITS = 50_000  # a build's shard closes after this many units (documents or windows) …
SHARD_CHARS = 16_000_000  # … or this many characters of text (a few million tokens: tens of MB of postings)
BUILD_STATE = "build.json"  # in the staging folder: the build's inputs and how many shards are tokenized
SHARDS = "shards"  # in the staging folder: pass 1's postings, unit lengths and vocabulary snapshots
# bm25s's score arrays, under the names `bm25s.BM25.save` and `bm25s.BM25.load` use by default
DATA, INDICES, INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"

logger = logging.getLogger("lengthwise.search.lexical.bm25")  # the build's messages are the lexical side's


def _plan(source: TextSource, per_document: np.ndarray, **settings: object) -> dict[str, object]:
    """What the build is of: its settings and shard sizes, and the source's digests of the texts and of their
    layout (sizes, window counts, spans). A rerun with the same plan resumes; any other build starts afresh."""
    import bm25s

    return {"format": 1, "bm25s": bm25s.__version__, "documents": len(source.sizes),
            "units": int(per_document.sum()), **{k: v.value if isinstance(v, Enum) else v for k, v in settings.items()},
            "shard_units": SHARD_UNITS, "shard_chars": SHARD_CHARS, "layout_sha256": source.layout_sha256,
            "texts_sha256": source.texts_sha256}  # fmt: skip


def _shard_bounds(lengths: np.ndarray, per_document: np.ndarray) -> list[int]:
    """The first document of each shard, and the document count: a shard closes once it holds `SHARD_UNITS`
    units or `SHARD_CHARS` characters (`lengths`: each text's; a document is never split)."""
    bounds, units, chars = [0], 0, 0
    for doc, (length, count) in enumerate(zip(np.asarray(lengths).tolist(), per_document.tolist(), strict=True)):
        units, chars = units + count, chars + length
        if units >= SHARD_UNITS or chars >= SHARD_CHARS:
            bounds.append(doc + 1)
            units = chars = 0
    if bounds[-1] != len(per_document):
        bounds.append(len(per_document))
    return bounds


def _resumed(staging: Path, plan: Mapping[str, object], shards: int) -> int | None:
    """How many shards an earlier run of the same build left tokenized in `staging`, or None when there is none to
    resume: whatever is there (another build's, or one stopped before its first record) is removed, and the log
    says why."""
    try:
        state = json.loads((staging / BUILD_STATE).read_text(encoding="utf-8"))
        recorded, done = state["plan"], int(state["tokenized"])
    except FileNotFoundError:
        if staging.exists():
            logger.warning("%s: an unfinished lexical build without its record is there; starting afresh", staging)
    except (OSError, ValueError, KeyError, TypeError):
        logger.warning("%s: the unfinished lexical build there has an unreadable record; starting afresh", staging)
    else:
        if recorded == plan and 0 <= done <= shards:
            logger.info("%s: resuming the lexical build, %d of %d shards already tokenized", staging, done, shards)
            return done
        changed = sorted(key for key in plan.keys() | recorded.keys() if plan.get(key) != recorded.get(key))
        logger.warning("%s: the unfinished lexical build there was of other inputs or settings (%s differ); "
                       "starting afresh", staging, ", ".join(changed) or "its progress")  # fmt: skip
    shutil.rmtree(staging, ignore_errors=True)
    return None


def _record(staging: Path, plan: Mapping[str, object], tokenized: int) -> None:
    """Record in `staging` that its first `tokenized` shards are done (atomically)."""
    from lengthwise.core.results import write_json_atomic

    write_json_atomic(staging / BUILD_STATE, {"plan": plan, "tokenized": tokenized})


def _offsets(sizes: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _start(staging: Path, sizes: np.ndarray, counts: np.ndarray) -> None:
    """A fresh staging folder: the texts' and windows' offsets, and the texts and spans arrays (allocated; the
    texts are written next, the spans shard by shard)."""
    (staging / SHARDS).mkdir(parents=True)
    np.save(staging / "texts.offsets.npy", _offsets(sizes))
    np.save(staging / "windows.offsets.npy", _offsets(counts))
    _allocate(staging / "texts.npy", np.uint8, (int(sizes.sum()),))
    _allocate(staging / "spans.npy", np.int64, (int(counts.sum()), 2))


def _allocate(path: Path, dtype: type[np.generic], shape: tuple[int, ...]) -> None:
    """An ``.npy`` file of `shape` (zeros, its blocks not written), filled later through a memory map."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    del array


def _tokenize_shards(
    staging: Path,
    tokenizer: Bm25Tokenizer,
    source: TextSource,
    whole: bool,
    bounds: list[int],
    done: int,
    plan: Mapping[str, object],
    on_progress: Callable[[int, int], None] | None,
) -> None:
    """Pass 1, from shard `done` on: read each shard's texts back, cut them into their windows and write the spans
    into place, tokenize its units and save their postings, snapshot the vocabulary, and record the shard done. The
    vocabulary is that of the last shard done, so term ids run on as if the corpus were tokenized in one go."""
    documents = bounds[-1]

    def tokenized(doc: int) -> None:  # the documents before `doc` are tokenized
        if on_progress is not None and doc % BLOCK == 0:
            on_progress(doc, documents)

    if done:
        tokenizer.load_vocab(str(staging / SHARDS), _vocab_name(done))
        if on_progress is not None:
            on_progress(bounds[done], documents)
    text_offsets = np.load(staging / "texts.offsets.npy")
    window_offsets = np.load(staging / "windows.offsets.npy")
    for shard in range(done, len(bounds) - 1):
        first, last = bounds[shard], bounds[shard + 1]
        texts = read_texts(staging / "texts.npy", text_offsets, first, last)
        spans = [source.cut(doc, text) for doc, text in enumerate(texts, first)]
        _write_slice(staging / "spans.npy", window_offsets, first, last, _stacked(spans))
        ids, lengths = _tokenize_shard(tokenizer, _units(texts, spans, whole, first, tokenized))
        np.save(staging / SHARDS / f"{shard:05d}.postings.npy", _postings(ids, lengths))
        np.save(staging / SHARDS / f"{shard:05d}.lengths.npy", lengths)
        tokenizer.save_vocab(str(staging / SHARDS), _vocab_name(shard + 1))
        _record(staging, plan, shard + 1)
        (staging / SHARDS / _vocab_name(shard)).unlink(missing_ok=True)
        if on_progress is not None:
            on_progress(last, documents)


def _vocab_name(shards: int) -> str:
    """The tokenizer's vocabulary after `shards` shards (in the staging folder's shards)."""
    return f"vocab.{shards:05d}.json"


def _write_slice(path: Path, offsets: np.ndarray, first: int, last: int, rows: np.ndarray) -> None:
    """Write `rows`, documents `first` … `last - 1`'s, in their place in the memory-mapped array at `path`."""
    start, end = int(offsets[first]), int(offsets[last])
    if end > start:
        array = np.load(path, mmap_mode="r+", allow_pickle=False)
        array[start:end] = rows
        array.flush()
        del array


def _stacked(spans: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(s).reshape(-1, 2) for s in spans])


def _units(
    texts: list[str], spans: list[np.ndarray], whole: bool, first: int, tokenized: Callable[[int], None]
) -> Iterator[str]:
    """What BM25 indexes of a shard's documents (`first` on): each one's text, or each of its windows' text. Asked
    for the next document's units, the tokenizer is done with the earlier ones: `tokenized` is told."""
    for doc, (text, pairs) in enumerate(zip(texts, spans, strict=True), first):
        if doc > first:
            tokenized(doc)
        if whole:
            yield text
        else:
            yield from (text[start:end] for start, end in pairs.tolist())


def _tokenize_shard(tokenizer: Bm25Tokenizer, units: Iterator[str]) -> tuple[np.ndarray, np.ndarray]:
    """The units' token ids back to back (int32) and each unit's length, with bm25s's tokenizer growing its
    vocabulary as bm25s's own indexing does (a unit without a term holds the empty-text placeholder)."""
    ids, lengths = array("i"), array("q")
    for unit in tokenizer.streaming_tokenize(units, update_vocab=True):
        ids.extend(unit)
        lengths.append(len(unit))
    return np.frombuffer(ids, dtype=np.int32), np.frombuffer(lengths, dtype=np.int64)


def _postings(ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(3, P) int32: a shard's distinct (term, unit) pairs, by term then unit (units numbered in the shard), and
    each pair's term frequency."""
    units = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    keys, frequencies = np.unique((ids.astype(np.int64) << 32) | units, return_counts=True)
    return np.stack([keys >> 32, keys & 0xFFFFFFFF, frequencies]).astype(np.int32)


def _shard(staging: Path, shard: int) -> tuple[np.ndarray, np.ndarray]:
    """Shard `shard`'s postings and unit lengths (pass 1's)."""
    folder = staging / SHARDS
    postings = np.load(folder / f"{shard:05d}.postings.npy", allow_pickle=False)
    return postings, np.load(folder / f"{shard:05d}.lengths.npy", allow_pickle=False)


def _write_bm25(staging: Path, shards: int, tokenizer: Bm25Tokenizer, k1: float, b: float) -> None:
    """Pass 2: the BM25 matrix of bm25s (Lucene scores, CSC by term: ``data`` float32 scores, ``indices`` int32
    units, ``indptr`` int64), assembled from the shards' postings into memory-mapped arrays, as
    ``bm25s.BM25(k1, b, method="lucene").index`` and ``save`` would write it from every unit's tokens at once.

    The document frequencies give each term's column (``indptr``) and idf; then every shard's scores go to the next
    free places of their terms' columns: shards come in unit order, so each column's units stay sorted, as bm25s's
    sort leaves them. bm25s writes its parameters and vocabulary itself (with empty score arrays, replaced here)."""
    import bm25s

    folder = staging / "bm25"
    shutil.rmtree(folder, ignore_errors=True)
    vocabulary = tokenizer.get_vocab_dict()
    frequencies, tokens, units = _document_frequencies(staging, shards, len(vocabulary))
    indptr = _offsets(frequencies)
    retriever = bm25s.BM25(k1=k1, b=b, method="lucene")
    retriever.vocab_dict, retriever.nonoccurrence_array = vocabulary, None
    retriever.scores = {"data": np.zeros(0, np.float32), "indices": np.zeros(0, np.int32), "indptr": indptr,
                        "num_docs": units}  # fmt: skip
    retriever.save(str(folder), show_progress=False)
    for name, dtype in ((DATA, np.float32), (INDICES, np.int32)):
        _allocate(folder / name, dtype, (int(indptr[-1]),))
    idf, average = _idf(frequencies, units), tokens / max(units, 1)
    cursor, first = indptr[:-1].copy(), 0
    for shard in range(shards):
        postings, lengths = _shard(staging, shard)
        _fill_shard(folder, cursor, postings, lengths, first, idf, average, k1, b)
        first += len(lengths)
    tokenizer.save_vocab(str(folder))
    tokenizer.save_stopwords(str(folder))


def _document_frequencies(staging: Path, shards: int, vocabulary: int) -> tuple[np.ndarray, int, int]:
    """Over every shard: each term's number of units holding it, the number of tokens and of units."""
    frequencies, tokens, units = np.zeros(vocabulary, dtype=np.int64), 0, 0
    for shard in range(shards):
        postings, lengths = _shard(staging, shard)
        frequencies += np.bincount(postings[0], minlength=vocabulary)
        tokens, units = tokens + int(lengths.sum()), units + len(lengths)
    return frequencies, tokens, units


def _idf(frequencies: np.ndarray, units: int) -> np.ndarray:
    """Each term's Lucene idf, by bm25s's own function (once per distinct frequency), kept in float32 as bm25s
    keeps it; 0 for a term no unit holds (the empty-text placeholder when no unit is empty)."""
    from bm25s.scoring import _score_idf_lucene

    values, inverse = np.unique(frequencies, return_inverse=True)
    idf = [_score_idf_lucene(int(df), N=units) if df else 0.0 for df in values.tolist()]
    return np.asarray(idf, dtype=np.float32)[inverse]


def _fill_shard(
    folder: Path,
    cursor: np.ndarray,
    postings: np.ndarray,
    lengths: np.ndarray,
    first: int,
    idf: np.ndarray,
    average: float,
    k1: float,
    b: float,
) -> None:
    """Write one shard's scores (bm25s's Lucene term-frequency component times the idf, in its float64 and its
    rounding to float32) and units at their terms' `cursor`, moved on past them."""
    from bm25s.scoring import _score_tfc_lucene

    terms, units, frequencies = postings
    if not len(terms):
        return
    tfc = _score_tfc_lucene(frequencies.astype(np.float32), lengths[units], average, k1, b)
    heads = np.flatnonzero(np.concatenate([[True], terms[1:] != terms[:-1]]))  # each term's first pair
    runs = np.diff(np.append(heads, len(terms)))
    places = cursor[terms] + np.arange(len(terms)) - np.repeat(heads, runs)
    cursor[terms[heads]] += runs
    data = np.load(folder / DATA, mmap_mode="r+", allow_pickle=False)
    indices = np.load(folder / INDICES, mmap_mode="r+", allow_pickle=False)
    data[places] = (idf[terms] * tfc).astype(np.float32)
    indices[places] = units + first
    data.flush()
    indices.flush()
    del data, indices
