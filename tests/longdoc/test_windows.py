"""The one window cutter (`lengthwise.core.tokens.windows`) that long documents and HiCL's segments share."""

from __future__ import annotations

import pytest

from lengthwise.core.tokens import segments, windows


@pytest.mark.parametrize("n", [1, 5, 10, 11, 37])
@pytest.mark.parametrize(("size", "stride"), [(4, None), (4, 2), (4, 3), (5, 1), (8, 8)])
def test_every_token_in_a_window_and_no_window_too_long(n: int, size: int, stride: int | None) -> None:
    spans = windows(n, size, stride)
    covered = {i for start, end in spans for i in range(start, end)}
    assert covered == set(range(n))
    assert all(0 < end - start <= size for start, end in spans)
    assert [s for s, _ in spans] == sorted({s for s, _ in spans})  # strictly increasing starts
    assert spans[-1][1] == n


def test_no_overlap_is_hicl_segments() -> None:
    ids = list(range(10))
    assert windows(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert segments(ids, 4) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_overlap_last_window_is_full_and_ends_at_the_end() -> None:
    assert windows(10, 4, 2) == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert windows(11, 4, 3) == [(0, 4), (3, 7), (6, 10), (7, 11)]


def test_sentence_cut_moves_back_only_within_the_last_quarter() -> None:
    # a cut point at 7 lies in the last quarter of the first window [0, 8): the window ends there
    assert windows(20, 8, cut_points=[7, 13, 15])[0] == (0, 7)
    # a cut point at 3 is too early (first half): the window keeps its full size
    assert windows(20, 8, cut_points=[3])[0] == (0, 8)
    spans = windows(20, 8, cut_points=[7, 13, 15])
    assert {i for s, e in spans for i in range(s, e)} == set(range(20))


@pytest.mark.parametrize(("args", "message"), [((0, 4), "empty"), ((5, 0), "size"), ((5, 4, 5), "stride")])
def test_bad_arguments_raise(args: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        windows(*args)
