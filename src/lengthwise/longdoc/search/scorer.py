"""Deprecated (0.2; removed in 0.3): `lengthwise.search.lexical.scorer`."""

from lengthwise.search.lexical.scorer import BM25Scorer

__all__ = ["BM25Scorer"]
