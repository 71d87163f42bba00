"""Deprecated (0.2; removed in 0.3): `lengthwise.LongIndex` (the search room's `lengthwise.search.index.LongIndex`
with the long-document method bound), `lengthwise.search.types` and `lengthwise.search.query_model`."""

from lengthwise.facade import LongIndex
from lengthwise.search.query_model import check_query_model
from lengthwise.search.types import Engine, Quantize

__all__ = ["Engine", "LongIndex", "Quantize", "check_query_model"]
