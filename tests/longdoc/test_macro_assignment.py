"""`pooling.macro_assignment`: each token's window, the one where it sits farthest from a cut; kept in O(tokens)
memory (a table of windows × tokens was 420 MB at 100k tokens, 42 GB at 1M), with the assignment of that table."""

from __future__ import annotations

import numpy as np
import pytest

from lengthwise.core.errors import SettingError
from lengthwise.longdoc._pipeline import window_spans
from lengthwise.longdoc.pooling import macro_assignment


def _by_table(n: int, spans: list[tuple[int, int]]) -> np.ndarray:
    """The definition, by a windows × tokens table of margins (the first window wins a tie)."""
    margins = np.full((len(spans), n), -1)
    for w, (start, end) in enumerate(spans):
        for t in range(start, end):
            margins[w, t] = min(t - start if start > 0 else n, end - 1 - t if end < n else n)
    return margins.argmax(axis=0)


@pytest.mark.parametrize("seed", range(40))
def test_the_assignment_is_the_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, size = int(rng.integers(1, 400)), int(rng.integers(2, 60))
    starts, ends = window_spans(n, size, int(rng.integers(1, size + 1)))
    spans = list(zip(starts.tolist(), ends.tolist(), strict=True))
    if seed % 3 == 0:
        spans = spans[::-1]  # any order of windows
    np.testing.assert_array_equal(macro_assignment(n, spans), _by_table(n, spans))


def test_a_token_in_no_window_is_refused() -> None:
    with pytest.raises(SettingError, match="do not cover every one of the 10 tokens"):
        macro_assignment(10, [(0, 4), (5, 10)])
