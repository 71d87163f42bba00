"""The part of bm25s the lexical side calls, as Protocols (bm25s ships no type information): its tokenizer (words to
stemmed term ids, the vocabulary saved and loaded) and its BM25 retriever (the score matrix, each text's scores)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, TypedDict

import numpy as np

__all__ = ["Bm25Retriever", "Bm25Scores", "Bm25Tokenizer"]


class Bm25Tokenizer(Protocol):
    """`bm25s.tokenization.Tokenizer` with a stemmer and stop words (`lengthwise.search.lexical.bm25._tokenizer`)."""

    word_to_stem: dict[str, str]
    stem_to_sid: dict[str, int]
    word_to_id: dict[str, int]

    def tokenize(
        self, texts: list[str], *, update_vocab: bool | str, return_as: str, show_progress: bool
    ) -> list[list[int]]: ...

    def streaming_tokenize(self, texts: Iterable[str], *, update_vocab: bool | str) -> Iterator[list[int]]: ...

    def get_vocab_dict(self) -> dict[str, int]: ...

    def reset_vocab(self) -> None: ...

    def save_vocab(self, save_dir: str, vocab_name: str = ...) -> None: ...

    def load_vocab(self, save_dir: str, vocab_name: str = ...) -> None: ...

    def save_stopwords(self, save_dir: str) -> None: ...


class Bm25Scores(TypedDict):
    """`bm25s.BM25.scores`: the score matrix in CSC by term, and the units it scores."""

    data: np.ndarray  # (postings,) float32 scores
    indices: np.ndarray  # (postings,) int32 units
    indptr: np.ndarray  # (terms + 1,) each term's first posting
    num_docs: int


class Bm25Retriever(Protocol):
    """`bm25s.BM25` (Lucene scores): its CSC score matrix by term (``data``, ``indices``, ``indptr``, ``num_docs``)
    and each unit's score for a text's terms."""

    scores: Bm25Scores
    vocab_dict: dict[str, int]
    nonoccurrence_array: np.ndarray | None

    def get_scores(self, query_tokens_single: list[int]) -> np.ndarray: ...

    def index(self, corpus: tuple[list[list[int]], dict[str, int]], *, show_progress: bool) -> None: ...

    def save(self, save_dir: str, *, show_progress: bool) -> None: ...
