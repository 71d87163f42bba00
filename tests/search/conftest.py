"""The search room's tests: the corpus they index is the long-document tests' haystack (`tests.longdoc.conftest`)."""

from __future__ import annotations

from pathlib import Path

from tests.longdoc.conftest import encode_windows, haystack_rows

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"

__all__ = ["HAYSTACK", "encode_windows", "haystack_rows"]
