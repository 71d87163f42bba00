"""Synthetic passkey / needle tasks (both styles) and their LongEmbed-style scoring, from tiny checked-in haystacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.encoder import MultiVectors
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.tasks.scoring import score_synthetic
from lengthwise.longdoc.tasks.synthetic import (
    _sentences,
    haystack_names,
    make_synthetic,
    read_synthetic,
    write_synthetic,
)

HAYSTACK = (Path(__file__).parent / "haystack.txt").read_text(encoding="utf-8").splitlines()
PROSE = (Path(__file__).parent / "prose.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tokenizer(minilm_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.mark.parametrize("task", ["passkey", "needle"])
def test_documents_have_their_length_their_needle_and_a_depth(tokenizer, task: str) -> None:
    data = make_synthetic(task, HAYSTACK, tokenizer, style="simple", lengths=(64, 200, 1000), per_length=6, seed=3)
    assert data.groups() == [64, 200, 1000]
    assert data.meta["haystack_repeats"] > 1  # 1000 tokens need the tiny haystack repeated (recorded)
    for item in data.items:
        ids = tokenizer(item.text, add_special_tokens=False)["input_ids"]
        assert abs(len(ids) - item.group) <= 2  # exact in ids; decoding may merge a piece at the edges
        needle = tokenizer.decode(
            tokenizer(item.needle, add_special_tokens=False)["input_ids"], clean_up_tokenization_spaces=True
        )
        assert needle.rstrip(".") in item.text
        assert 0.0 <= item.depth <= 1.0
    queries = [item.query for item in data.items if item.group == 200]
    assert len(set(queries)) == len(queries)  # one distinct needle per document of a group


def test_generation_is_seeded(tokenizer) -> None:
    first = make_synthetic("needle", HAYSTACK, tokenizer, style="simple", lengths=(128,), per_length=4, seed=1)
    again = make_synthetic("needle", HAYSTACK, tokenizer, style="simple", lengths=(128,), per_length=4, seed=1)
    other = make_synthetic("needle", HAYSTACK, tokenizer, style="simple", lengths=(128,), per_length=4, seed=2)
    assert first.items == again.items
    assert first.items != other.items


def test_beir_folder_round_trip(tokenizer, tmp_path: Path) -> None:
    data = make_synthetic("passkey", HAYSTACK, tokenizer, style="simple", lengths=(64, 128), per_length=3)
    write_synthetic(data, tmp_path / "passkey")
    assert read_synthetic(tmp_path / "passkey").items == data.items
    from lengthwise.evaluation.data import read_beir

    beir = read_beir(tmp_path / "passkey", "test")  # a plain BEIR reader takes the folder too
    assert len(beir.doc_ids) == len(data.items)


def test_bad_requests_are_errors(tokenizer, tmp_path: Path) -> None:
    with pytest.raises(LongDocError, match="per_length=500"):
        make_synthetic("passkey", HAYSTACK, tokenizer, style="simple", lengths=(64,), per_length=500)
    with pytest.raises(LongDocError, match="task="):
        make_synthetic("haystack", HAYSTACK, tokenizer)  # type: ignore[arg-type]
    with pytest.raises(LongDocError, match="longdoc synth"):
        read_synthetic(tmp_path)
    with pytest.raises(LongDocError, match="style="):
        make_synthetic("needle", PROSE, tokenizer, style="hard")  # type: ignore[arg-type]
    with pytest.raises(LongDocError, match=r"names only 0 people or places.*simple style"):
        make_synthetic("needle", HAYSTACK, tokenizer, lengths=(64,), per_length=3)  # plain facts name no one


def test_scoring_ranks_within_groups_and_shares_ties(tokenizer) -> None:
    data = make_synthetic("passkey", HAYSTACK, tokenizer, style="simple", lengths=(64, 128), per_length=4, seed=0)
    eye = np.eye(8, dtype=np.float32)
    perfect = score_synthetic(data, eye, eye)
    assert perfect.by_length == {64: 100.0, 128: 100.0} and perfect.mean == 100.0
    # documents of group 128 all identical: each query ties with 4 documents → 1/4 each
    tied = eye.copy()
    tied[4:] = np.ones(8, dtype=np.float32)
    result = score_synthetic(data, eye, tied)
    assert result.by_length == {64: 100.0, 128: 25.0}
    assert sum(row["count"] for row in result.by_depth) == 8
    # another group's document can never win: group 64's queries point at group 128's documents, unranked
    crossed = np.roll(eye, 4, axis=0)
    assert score_synthetic(data, eye, crossed).by_length[64] == 25.0  # all four tie at 0 inside the group


def test_multi_vector_scoring_takes_the_best_window(tokenizer) -> None:
    data = make_synthetic("needle", HAYSTACK, tokenizer, style="simple", lengths=(64,), per_length=3, seed=0)
    queries = np.eye(4, dtype=np.float32)[:3]
    # document i has a noise window (axis 3) and its own window (axis i): the max finds it, the mean would too
    vectors = np.stack([v for i in range(3) for v in (np.eye(4)[3], np.eye(4)[i])]).astype(np.float32)
    documents = MultiVectors(vectors, np.arange(0, 7, 2))
    assert score_synthetic(data, queries, documents).mean == 100.0


# --- the realistic style (issue 24) --------------------------------------------------------------------------------


@pytest.mark.parametrize("task", ["passkey", "needle"])
def test_realistic_documents_are_their_own_prose_with_a_named_needle_and_a_paraphrased_query(tokenizer, task) -> None:
    data = make_synthetic(task, PROSE, tokenizer, lengths=(64, 200, 1500), per_length=6, seed=3)
    assert data.meta["style"] == "realistic" and data.groups() == [64, 200, 1500]
    names = set(haystack_names(_sentences(PROSE)))
    for group in data.groups():
        members = [item for item in data.items if item.group == group]
        # each document is its own stretch: with the needle taken out, no two documents of a group are the same
        bodies = [item.text.replace(item.needle, "") for item in members]
        assert len(set(bodies)) == len(bodies)
        for item in members:
            count = len(tokenizer(item.text, add_special_tokens=False)["input_ids"])
            assert group - 60 <= count <= group  # whole sentences up to L tokens (one sentence short at most)
            assert item.needle in item.text and item.text[:1].isupper()  # written as the haystack is (case kept)
            name = next(n for n in names if n in item.needle)
            assert name in item.query  # the query asks about the needle's name …
            assert set(item.query.lower().split()) != set(item.needle.lower().split())  # … in other words
    assert data.meta["needle_words_in_haystack"] > 0.2  # the name at least, and common words
    assert data.meta["query_words_not_in_needle"] > 0.3
    assert 0.0 <= data.meta["queries_whose_name_another_document_mentions"] <= 1.0


def test_realistic_generation_is_seeded_and_the_simple_style_is_unchanged(tokenizer) -> None:
    first = make_synthetic("needle", PROSE, tokenizer, lengths=(128,), per_length=4, seed=1)
    assert first.items == make_synthetic("needle", PROSE, tokenizer, lengths=(128,), per_length=4, seed=1).items
    assert first.items != make_synthetic("needle", PROSE, tokenizer, lengths=(128,), per_length=4, seed=2).items
    # the simple style draws exactly as the first generator did: one stretch shared by the group's documents
    simple = make_synthetic("needle", HAYSTACK, tokenizer, style="simple", lengths=(128,), per_length=4, seed=1)
    assert simple.meta["round_trip_exact"] >= 3 and "names_pool" not in simple.meta


def test_haystack_names_are_proper_names_not_capitalised_words() -> None:
    names = haystack_names(_sentences(PROSE))
    assert {"Corvel", "Lindmoor", "Tobias", "Marta"} <= set(names)
    assert "The" not in names and "When" not in names  # sentence-initial words are not counted
    text = ["In June the Dutch traders met the English ones.", "Later in June, Dutch and English ships sailed.",
            "By June the Dutch had left, and the English too."]  # fmt: skip
    assert haystack_names(text) == []  # months and peoples are not someone or somewhere
