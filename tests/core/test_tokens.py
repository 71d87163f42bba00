from __future__ import annotations

import random

import pytest

from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.core.tokens import (
    Elongation,
    content_ids,
    elongate,
    elongation_factor,
    first_k,
    shuffle_words,
    special_tokens,
)


@pytest.fixture(scope="module")
def tokenizer(minilm_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


def test_special_tokens_of_bert(tokenizer) -> None:
    specials = special_tokens(tokenizer)
    assert specials.prefix == (tokenizer.cls_token_id,)
    assert specials.suffix == (tokenizer.sep_token_id,)
    assert specials.count == 2


def test_elongated_input_has_cls_and_sep_once(tokenizer) -> None:
    specials = special_tokens(tokenizer)
    ids = content_ids(tokenizer, ["The cat sat on the mat."])[0]
    wrapped = specials.wrap(elongate(ids, 10, max_content=254))
    assert wrapped.count(tokenizer.cls_token_id) == 1
    assert wrapped.count(tokenizer.sep_token_id) == 1
    assert wrapped[0] == tokenizer.cls_token_id and wrapped[-1] == tokenizer.sep_token_id
    assert wrapped[1:-1] == ids * 10


def test_elongation_caps_m_and_never_cuts_a_copy() -> None:
    ids = list(range(7))
    out = elongate(ids, 100, max_content=30)
    assert len(out) == 28  # floor(30 / 7) = 4 whole copies
    assert out == ids * 4


@pytest.mark.parametrize("n", [1, 3, 50, 127, 128, 254])
def test_elongation_never_exceeds_max_content(n: int) -> None:
    out = elongate(list(range(n)), 1000, max_content=254)
    assert len(out) <= 254
    assert len(out) % n == 0


def test_text_longer_than_budget_is_truncated_to_one_copy() -> None:
    out = elongate(list(range(300)), 5, max_content=254)
    assert out == list(range(254))


def test_elongation_factor_modes() -> None:
    rng = random.Random(0)
    assert elongation_factor(10, 254, Elongation("fixed", 100)) == 25
    assert elongation_factor(10, 254, Elongation("fixed", 3)) == 3
    assert elongation_factor(10, 254, Elongation("twice")) == 2
    assert elongation_factor(200, 254, Elongation("twice")) == 1
    draws = {elongation_factor(10, 254, Elongation("random"), rng) for _ in range(500)}
    assert draws == set(range(1, 26))


def test_elongation_parse_and_validation() -> None:
    assert Elongation.parse("100") == Elongation("fixed", 100)
    assert Elongation.parse("random").mode == "random"
    assert Elongation.parse("Twice").mode == "twice"
    with pytest.raises(SettingError, match="elongation='lots': use a positive integer"):
        Elongation.parse("lots")
    with pytest.raises(SettingError, match="m=0: the elongation factor must be ≥ 1"):
        Elongation("fixed", 0)


def test_empty_inputs_are_rejected(tokenizer) -> None:
    with pytest.raises(DataFormatError, match="text #1 is empty"):
        content_ids(tokenizer, ["fine", "   "])
    with pytest.raises(DataFormatError, match="text #0 is empty"):
        content_ids(tokenizer, [""])
    with pytest.raises(DataFormatError, match=r"text #0 has 1,000,001 characters .*split the document"):
        content_ids(tokenizer, ["a" * 1_000_001])
    with pytest.raises(SettingError, match="empty token sequence"):
        elongate([], 3, 10)


def test_first_k_and_content_truncation(tokenizer) -> None:
    ids = content_ids(tokenizer, ["one two three four five six"], max_content=4)[0]
    assert len(ids) == 4
    assert first_k(ids, 2) == ids[:2]
    assert first_k(ids, 10) == ids
    with pytest.raises(SettingError, match="k=0"):
        first_k(ids, 0)


def test_token_level_elongation_differs_from_string_join(tokenizer) -> None:
    """Joining strings re-tokenizes across copies ("hello"+"hello" → hello ##hel ##lo); ids must not."""
    ids = content_ids(tokenizer, ["hello"])[0]
    joined = content_ids(tokenizer, ["hello" * 3])[0]
    assert elongate(ids, 3, 254) == ids * 3
    assert joined != ids * 3


def test_shuffle_words_keeps_the_words() -> None:
    text = "the quick brown fox jumps over the lazy dog"
    shuffled = shuffle_words(text, random.Random(1))
    assert sorted(shuffled.split()) == sorted(text.split())
    assert shuffled != text
    assert shuffle_words("single", random.Random(1)) == "single"


def test_elongation_mode_is_a_str_enum() -> None:
    from lengthwise.core.tokens import ElongationMode

    assert Elongation("random").mode is ElongationMode.RANDOM
    assert Elongation.parse("twice").describe() == "twice" and Elongation.parse("7").describe() == "7"
    with pytest.raises(SettingError, match="mode='sometimes': not an elongation mode; use one of fixed, random, twice"):
        Elongation("sometimes")


def test_kept_text_is_what_survives_truncation(tokenizer) -> None:
    """13.3: the word-shuffle probe shuffles only this part, so both sides hold the same words."""
    from lengthwise.core.tokens import kept_text

    text = "alpha beta gamma delta epsilon zeta eta theta"
    assert kept_text(tokenizer, text, 100) == text
    kept = kept_text(tokenizer, text, 3)
    assert kept == "alpha beta gamma"
    assert tokenizer(kept, add_special_tokens=False)["input_ids"] == content_ids(tokenizer, [text], 3)[0]
