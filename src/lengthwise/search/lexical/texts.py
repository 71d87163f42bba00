"""The documents a lexical build indexes (`lengthwise.search.lexical.bm25`), read as the build needs them.

A first pass gives each document's size, a second writes every text into place in the lexical folder's
``texts.npy``, and each shard of the build then reads its own texts back from there: the build holds one shard of
text at a time, whatever the corpus's size. `in_memory` wraps texts and spans a caller already holds;
`from_corpus` reads the corpus file an index was encoded from (JSONL or text, gzipped or not), in whatever order
the file holds its documents (a corpus encoded by several workers, or repaired, is indexed in another order), and
checks it against the index as it goes: no document missing or extra, the same digest of every (id, text) as when
it was encoded, and the same text in both passes.
"""

from __future__ import annotations

import hashlib
import itertools
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from lengthwise.core.errors import LongDocError

__all__ = ["TextSource", "from_corpus", "in_memory", "read_texts"]

Cut = Callable[[int, str], np.ndarray]  # (document number, its text) → its (k, 2) window spans


@dataclass(frozen=True)
class TextSource:
    """Documents in the dense index's order: what is known of them before any is written, and how to write their
    text and cut it into the index's windows."""

    sizes: np.ndarray  # (n,) UTF-8 bytes of each text
    lengths: np.ndarray  # (n,) characters of each text (what a shard's budget counts)
    counts: np.ndarray  # (n,) window rows of each document in the dense index
    texts_sha256: str  # names the texts to a resumed build: the encode folder's digest, or one computed here
    encoded_sha256: str | None  # the encode folder's digest of every (id, text), recorded with the index
    layout_sha256: str  # names the layout: the sizes, the window counts, and the spans or how they are cut
    write: Callable[[Path], None]  # write every text into place in an allocated ``texts.npy``
    cut: Cut


def in_memory(texts: Sequence[str], spans: Sequence[np.ndarray], texts_sha256: str | None = None) -> TextSource:
    """Texts and their window spans held by the caller; `texts_sha256` names the texts when given (else a digest
    of them is computed)."""
    digest = None if texts_sha256 is not None else hashlib.sha256()
    sizes = _utf8_sizes(texts, digest)
    counts = np.asarray([len(s) for s in spans], dtype=np.int64)
    layout = _layout(sizes, counts)
    for doc_spans in spans:
        layout.update(np.ascontiguousarray(doc_spans, dtype=np.int64).tobytes())

    def write(path: Path) -> None:
        with open(path, "r+b") as handle:
            handle.seek(_data_start(handle))
            for text in texts:
                handle.write(text.encode("utf-8"))

    named = digest.hexdigest() if digest is not None else str(texts_sha256)
    return TextSource(sizes, np.asarray([len(t) for t in texts], dtype=np.int64), counts, named, texts_sha256,
                      layout.hexdigest(), write, lambda doc, _: np.asarray(spans[doc]).reshape(-1, 2))  # fmt: skip


def from_corpus(
    corpus: Path, doc_ids: Sequence[str], counts: np.ndarray, recorded: str | None, cut: Cut, cut_key: str
) -> TextSource:
    """The documents `doc_ids` (the index's, in its order) from the corpus file `corpus`, checked: none missing or
    extra and, where the encode folder `recorded` a digest of every (id, text), the same. `cut` gives a document's
    spans from its text and `cut_key` names how it cuts them. Reads the file once here; `write` reads it again."""
    from lengthwise.core.corpus import corpus_rows, text_digest

    if not corpus.is_file():
        raise LongDocError(
            None, None, f"{corpus}: no such corpus file; pass the corpus.jsonl the index was encoded from"
        )
    place = {doc_id: n for n, doc_id in enumerate(doc_ids)}
    sizes, lengths, digests = _measured(corpus, place)
    texts_sha256 = _checked_digest(corpus, doc_ids, digests, recorded)
    layout = _layout(sizes, counts)
    layout.update(cut_key.encode())

    def write(path: Path) -> None:
        """Every text at its place in `path`, read in the file's order; a text that differs from the first pass's
        (the file changed under the build) stops it."""
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        with open(path, "r+b") as handle:
            start = _data_start(handle)
            for doc_id, text in corpus_rows(corpus):
                n, data = place.get(doc_id), text.encode("utf-8")
                if n is None or len(data) != sizes[n] or text_digest(text) != digests[n]:
                    raise LongDocError(None, None, f"{corpus}: document {doc_id!r} changed while the index was "
                                       "being built; build it again from a corpus that stays as it is")  # fmt: skip
                handle.seek(start + int(offsets[n]))
                handle.write(data)

    return TextSource(sizes, lengths, np.asarray(counts, dtype=np.int64), texts_sha256, texts_sha256,
                      layout.hexdigest(), write, cut)  # fmt: skip


def _measured(corpus: Path, place: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each indexed document's UTF-8 size, characters and `text_digest`, in the index's order, from one pass over
    `corpus`; a `LongDocError` when a document of the index is missing from it or it holds others."""
    from lengthwise.core.corpus import corpus_rows, text_digest

    sizes = np.full(len(place), -1, dtype=np.int64)
    lengths = np.zeros(len(place), dtype=np.int64)
    digests = np.zeros(len(place), dtype=np.uint64)
    extra = 0
    for doc_id, text in corpus_rows(corpus):
        n = place.get(doc_id)
        if n is None or sizes[n] >= 0:  # not indexed, or a second row of one id
            extra += 1
            continue
        sizes[n], lengths[n], digests[n] = len(text.encode("utf-8")), len(text), text_digest(text)
    missing = int((sizes < 0).sum())
    if missing or extra:
        raise LongDocError(
            None,
            None,
            f"{corpus}: {missing} of the index's {len(place)} documents are missing from it and "
            f"{extra} of its documents are not in the index; pass the corpus the index was encoded "
            "from",
        )
    return sizes, lengths, digests


def _checked_digest(corpus: Path, doc_ids: Sequence[str], digests: np.ndarray, recorded: str | None) -> str:
    """The digest of every (id, text) of the corpus, the encode folder's formula; a `LongDocError` when it is not
    the one `recorded`."""
    from lengthwise.core.corpus import texts_sha256

    found = texts_sha256(dict(zip(doc_ids, digests.tolist(), strict=True)))
    if recorded is not None and found != recorded:
        raise LongDocError(
            None,
            None,
            f"{corpus}: the documents' text differs from the text that was encoded (digest "
            f"{found[:12]}, encoded {recorded[:12]}); pass the corpus the index was encoded "
            "from, or encode this one",
        )
    return found


def _layout(sizes: np.ndarray, counts: np.ndarray) -> hashlib._Hash:
    """A sha256 begun over the texts' sizes and the documents' window counts."""
    layout = hashlib.sha256(np.ascontiguousarray(sizes, dtype=np.int64).tobytes())
    layout.update(np.ascontiguousarray(counts, dtype=np.int64).tobytes())
    return layout


def _utf8_sizes(texts: Sequence[str], digest: hashlib._Hash | None) -> np.ndarray:
    """The UTF-8 size of each text, each text fed to `digest` (size first) when given."""
    sizes = array("q")
    for text in texts:
        data = text.encode("utf-8")
        sizes.append(len(data))
        if digest is not None:
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    return np.frombuffer(sizes, dtype=np.int64)


def _data_start(handle: BinaryIO) -> int:
    """Where the data of the ``.npy`` file open in `handle` starts (after its header)."""
    handle.seek(0)
    major, _ = np.lib.format.read_magic(handle)
    read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    read(handle)
    return int(handle.tell())


def read_texts(path: Path, offsets: np.ndarray, first: int, last: int) -> list[str]:
    """Documents `first` … `last - 1`'s texts from the ``texts.npy`` at `path` (read, not memory-mapped: what was
    read is not kept resident)."""
    with open(path, "rb") as handle:
        start = _data_start(handle) + int(offsets[first])
        handle.seek(start)
        data = handle.read(int(offsets[last]) - int(offsets[first]))
    ends = (offsets[first : last + 1] - offsets[first]).tolist()
    return [data[a:b].decode("utf-8") for a, b in itertools.pairwise(ends)]
