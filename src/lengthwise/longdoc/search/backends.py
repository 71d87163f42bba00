"""Deprecated (0.2; removed in 0.3): `lengthwise.search.backend`, and `open_index` / `build_index` as
`lengthwise.facade` binds them."""

from lengthwise.facade import build_index, open_index
from lengthwise.search.backend import BACKENDS, DEFAULT_NAME, Backend

__all__ = ["BACKENDS", "DEFAULT_NAME", "Backend", "build_index", "open_index"]
