"""Deprecated (0.2; removed in 0.3): the fusion rules are `lengthwise.search.fusion`, the modes and rule names
`lengthwise.core.fusion`, the settings and hits `lengthwise.search.types`; `HybridSearch` became
`lengthwise.search.searcher.Searcher` (an index's `searcher`)."""

from lengthwise.core.fusion import Fusion, Mode
from lengthwise.search.fusion import exact_candidates, fuse, fuse_exact
from lengthwise.search.types import DEPTH, FusionSettings, Hit, Passage

__all__ = ["DEPTH", "Fusion", "FusionSettings", "Hit", "Mode", "Passage", "exact_candidates", "fuse", "fuse_exact"]
