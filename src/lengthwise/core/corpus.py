"""A corpus as `lengthwise encode` reads it and every later step checks it: its rows, each text's digest, and one
digest of the whole (id, text) set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Final

from lengthwise.core.errors import LongDocError

__all__ = [
    "TEXTS",
    "check_corpus",
    "corpus_digests",
    "corpus_file",
    "corpus_rows",
    "text_digest",
    "texts_sha256",
]

TEXTS: Final = "texts_sha256"  # a manifest's (and an index's) digest of every (id, text) it holds: not a setting


def text_digest(text: str) -> int:
    """A 63-bit digest of a document's text: each shard records its documents', so a resumed run finds the documents
    whose text changed, and the Ray runner checks that each actor got the text the plan read."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little") >> 1


def texts_sha256(digests: Mapping[str, int]) -> str:
    """One sha256 over every (id, text digest) pair, in id order: the same for the same documents, however they
    are split into shards or ordered in the corpus."""
    hasher = hashlib.sha256()
    for doc_id in sorted(digests):
        hasher.update(f"{json.dumps(doc_id)}\t{digests[doc_id]}\n".encode())
    return hasher.hexdigest()


def corpus_file(data: Path) -> Path:
    """A corpus file as given, or the ``corpus.jsonl`` of a BEIR folder."""
    if not data.is_dir():
        return data
    for name in ("corpus.jsonl", "corpus.jsonl.gz"):
        if (data / name).is_file():
            return data / name
    raise LongDocError(
        None, None, f"{data}: a folder without corpus.jsonl; pass a corpus.jsonl, a BEIR folder or a .txt file"
    )


def _corpus_lines(path: str | Path) -> Iterator[tuple[int, str, str]]:
    """(line, id, text) of each document of a JSONL corpus or a text file (see `corpus_rows`)."""
    from lengthwise.core._textio import checked_text, jsonl_objects, open_text, row_id

    path = Path(path)
    if not path.is_file():
        raise LongDocError(None, None, f"{path}: no such file; pass a corpus.jsonl (or .txt, one document per line)")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        for line_no, row in jsonl_objects(path, "a JSON object with a 'text' field"):
            text = checked_text(path, line_no, row.get("text"), "'text'")
            title, doc_id = str(row.get("title") or "").strip(), row_id(path, line_no, row, line_no)
            if not doc_id.strip():  # a hit under "" (or spaces) cannot be told from no id at all
                raise LongDocError(None, None, f"{path}:{line_no}: an empty _id; give every document its own id")
            yield line_no, doc_id, f"{title} {text}" if title else text
        return
    with open_text(path) as handle:
        for line_no, line in handle.lines():
            yield line_no, str(line_no), checked_text(path, line_no, line, "the line")


def corpus_rows(path: str | Path) -> Iterator[tuple[str, str]]:
    """(id, text) of each document of a JSONL corpus (``_id``/``id``, ``text``, optional ``title``) or a text
    file (one document per line, id = line number), read lazily. A row without text raises naming file:line."""
    for _, doc_id, text in _corpus_lines(path):
        yield doc_id, text


def corpus_digests(path: str | Path) -> dict[str, int]:
    """Read the whole corpus once before any compute: every row must have text and a unique id. Returns each id's
    `text_digest`, in corpus order.

    Raises `LongDocError` naming the file and the line of a second occurrence of an id: two vectors under one id
    could not be told apart by a search or an evaluation.
    """
    digests: dict[str, int] = {}
    for line_no, doc_id, text in _corpus_lines(path):
        if doc_id in digests:
            first = next(n for n, other, _ in _corpus_lines(path) if other == doc_id)
            raise LongDocError(
                None,
                None,
                f"{path}:{line_no}: duplicate _id {doc_id!r} (first at line {first}); give every document its own id",
            )
        digests[doc_id] = text_digest(text)
    return digests


def check_corpus(path: str | Path) -> int:
    """`corpus_digests`' checks; returns the number of documents."""
    return len(corpus_digests(path))
