"""Deprecated (0.2; removed in 0.3): search moved to its own room, `lengthwise.search`. These modules re-export the
names they held from their new places; import from there (CHANGELOG.md, 0.2, says where each went)."""

import warnings

warnings.warn(
    "lengthwise.longdoc.search is deprecated and will be removed in 0.3; import from lengthwise.search "
    "(lengthwise.LongIndex for the index)",
    DeprecationWarning,
    stacklevel=2,
)
