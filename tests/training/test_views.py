"""Each objective's views on constructed token ids (METHODS §3), and the collators on a real tokenizer."""

from __future__ import annotations

import random

import pytest

from lengthwise.core.embed import TokenView
from lengthwise.core.errors import SettingError
from lengthwise.core.tokens import Elongation, segments, split_sentences
from lengthwise.training._collate import SegmentCollator, ViewCollator, row_rng
from lengthwise.training._views import (
    coco_dr_view,
    copy_concat_view,
    laser_intra_view,
    laser_self_view,
    simcse_view,
    simde_view,
)
from lengthwise.training.config import Method

SENTENCES = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]


def test_simcse_view_is_the_text_twice_truncated() -> None:
    view = simcse_view(list(range(10)), max_content=6)
    assert view.anchor == view.positive == list(range(6))


@pytest.mark.parametrize("anchor", ["first", "random"])
def test_laser_self_positive_is_whole_copies_of_the_anchor(anchor: str) -> None:
    rng = random.Random(3)
    for _ in range(50):
        view = laser_self_view(SENTENCES, Elongation("random"), 20, rng, anchor)  # type: ignore[arg-type]
        n = len(view.anchor)
        assert view.anchor in SENTENCES
        assert len(view.positive) % n == 0 and len(view.positive) <= 20
        assert view.positive == view.anchor * (len(view.positive) // n)
    first = laser_self_view(SENTENCES, Elongation("twice"), 20, rng)
    assert first.anchor == [1, 2, 3] and first.positive == [1, 2, 3, 1, 2, 3]


def test_laser_self_random_m_covers_its_range() -> None:
    rng = random.Random(0)
    factors = {len(laser_self_view([[7, 8]], Elongation("random"), 10, rng).positive) // 2 for _ in range(300)}
    assert factors == {1, 2, 3, 4, 5}  # m uniform in 1..floor(10 / 2)


def test_coco_dr_positive_is_the_rest_of_the_document() -> None:
    view = coco_dr_view(SENTENCES, 100, random.Random(0))
    assert view.anchor == [1, 2, 3] and view.positive == [4, 5, 6, 7, 8, 9, 10]
    rng = random.Random(1)
    for _ in range(20):
        view = coco_dr_view(SENTENCES, 100, rng, "random")
        assert sorted(view.anchor + view.positive) == list(range(1, 11))
    with pytest.raises(SettingError, match=r"len\(sentences\)=1: coco-dr needs a document of at least two sentences"):
        coco_dr_view([[1, 2]], 100, rng)


def test_laser_intra_elongates_only_the_anchor_side() -> None:
    view = laser_intra_view(SENTENCES, Elongation("fixed", 3), 100, random.Random(0))
    assert view.anchor == [1, 2, 3] * 3 and view.positive == [4, 5, 6, 7, 8, 9, 10]
    capped = laser_intra_view(SENTENCES, Elongation("fixed", 50), 8, random.Random(0))
    assert capped.anchor == [1, 2, 3] * 2 and capped.positive == [4, 5, 6, 7, 8, 9, 10][:8]


def test_copy_concat_draws_each_side_its_own_m() -> None:
    rng = random.Random(0)
    draws = [copy_concat_view([1, 2], [3, 4], Elongation("random"), 40, rng) for _ in range(100)]
    assert all(len(v.anchor) <= 40 and len(v.positive) <= 40 for v in draws)
    assert any(len(v.anchor) != len(v.positive) for v in draws)


def test_simde_halves_are_disjoint_ordered_and_non_empty() -> None:
    document = [[i * 10 + 1, i * 10 + 2] for i in range(5)]
    rng = random.Random(0)
    seen = set()
    for _ in range(200):
        view = simde_view(document, 100, rng)
        assert view.anchor and view.positive
        assert not set(view.anchor) & set(view.positive)
        assert sorted(view.anchor + view.positive) == [t for ids in document for t in ids]
        assert view.anchor == sorted(view.anchor) and view.positive == sorted(view.positive)  # order kept
        seen.add(tuple(view.anchor))
    assert len(seen) > 10  # really random
    two = {tuple(simde_view([[1], [2]], 10, rng).anchor) for _ in range(50)}
    assert two == {(1,), (2,)}


def test_segments_slice_without_overlap() -> None:
    ids = list(range(70))
    pieces = segments(ids, 32)
    assert [len(p) for p in pieces] == [32, 32, 6] and [t for p in pieces for t in p] == ids
    assert len(segments(list(range(64)), 32)) == 1 + (64 - 1) // 32
    with pytest.raises(SettingError, match="empty token sequence"):
        segments([], 32)


def test_split_sentences_keeps_abbreviations_and_order() -> None:
    text = "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday! Was it late?"
    assert split_sentences(text) == ["Dr. Smith went to Washington.", "He arrived at 5 p.m. on Monday!", "Was it late?"]


def test_row_rng_depends_on_seed_and_row_only() -> None:
    assert row_rng(1, 5).random() == row_rng(1, 5).random()
    assert row_rng(1, 5).random() != row_rng(1, 6).random() != row_rng(2, 5).random()


@pytest.mark.parametrize("method", [Method.LASER_SELF, Method.LASER_INTRA, Method.COPY_CONCAT])
def test_elongated_batches_stay_within_n_with_specials_once(tiny_model, method: Method) -> None:
    view = TokenView(tiny_model)  # N = 64
    collator = ViewCollator(method, view, seed=0, elongation=Elongation("random"))
    if method is Method.COPY_CONCAT:
        rows = [{"row": i, "anchor": f"short text {i}", "positive": f"another one {i} here"} for i in range(16)]
    else:
        rows = [{"row": i, "sentences": [f"Sentence number {i} is here.", "And a second one."]} for i in range(16)]
    batch = collator(rows)
    cls, sep = view.specials.prefix[0], view.specials.suffix[0]
    for column in ("anchor", "positive"):
        ids, mask = batch[f"{column}_input_ids"], batch[f"{column}_attention_mask"]
        assert ids.shape[1] <= 64
        for row, row_mask in zip(ids.tolist(), mask.tolist(), strict=True):
            real = [t for t, m in zip(row, row_mask, strict=True) if m]
            assert real.count(cls) == 1 and real.count(sep) == 1 and real[0] == cls and real[-1] == sep
    lengths = (
        batch["positive_attention_mask"].sum(1)
        if method is Method.LASER_SELF
        else batch["anchor_attention_mask"].sum(1)
    )
    assert int(lengths.max()) > 20  # elongation happened
    again = ViewCollator(method, view, seed=0, elongation=Elongation("random"))(rows)
    assert all((again[key] == batch[key]).all() for key in batch)  # deterministic per (seed, row)


def test_segment_collator_marks_owners_and_lengths(tiny_model) -> None:
    view = TokenView(tiny_model)
    texts = [" ".join(["word"] * 50), "short one", " ".join(["other"] * 70)]
    batch = SegmentCollator(view, segment_length=16)([{"row": i, "text": t} for i, t in enumerate(texts)])
    owner, lengths = batch["segments_owner"].tolist(), batch["segments_segment_length"].tolist()
    n_tokens = [min(50, 62), 2, 62]  # content budget N - 2 = 62
    for index, n in enumerate(n_tokens):
        mine = [length for o, length in zip(owner, lengths, strict=True) if o == index]
        assert sum(mine) == n and len(mine) == 1 + (n - 1) // 16
    assert batch["segments_input_ids"].shape[1] <= 16 + 2
