"""Deprecated (0.2; removed in 0.3): `lengthwise.search.lexical.bm25` (the BM25 sides),
`lengthwise.search.lexical.build` (their build) and `lengthwise.longdoc.method.char_spans`."""

from lengthwise.longdoc.method import char_spans
from lengthwise.search.lexical.bm25 import BothGranularities, LexicalIndex, open_lexical, require_bm25s
from lengthwise.search.lexical.build import build_text_side, check_corpus_digest
from lengthwise.search.types import Granularity

__all__ = [
    "BothGranularities",
    "Granularity",
    "LexicalIndex",
    "build_text_side",
    "char_spans",
    "check_corpus_digest",
    "open_lexical",
    "require_bm25s",
]
