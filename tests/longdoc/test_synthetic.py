"""Synthetic passkey / needle tasks and their LongEmbed-style scoring, from a tiny checked-in haystack."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.encoder import MultiVectors
from lengthwise.longdoc.config import LongDocError
from lengthwise.longdoc.scoring import score_synthetic
from lengthwise.longdoc.synthetic import make_synthetic, read_synthetic, write_synthetic

HAYSTACK = (Path(__file__).parent / "haystack.txt").read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="module")
def tokenizer(minilm_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_path)


@pytest.mark.parametrize("task", ["passkey", "needle"])
def test_documents_have_their_length_their_needle_and_a_depth(tokenizer, task: str) -> None:
    data = make_synthetic(task, HAYSTACK, tokenizer, lengths=(64, 200, 1000), per_length=6, seed=3)
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
    first = make_synthetic("needle", HAYSTACK, tokenizer, lengths=(128,), per_length=4, seed=1)
    again = make_synthetic("needle", HAYSTACK, tokenizer, lengths=(128,), per_length=4, seed=1)
    other = make_synthetic("needle", HAYSTACK, tokenizer, lengths=(128,), per_length=4, seed=2)
    assert first.items == again.items
    assert first.items != other.items


def test_beir_folder_round_trip(tokenizer, tmp_path: Path) -> None:
    data = make_synthetic("passkey", HAYSTACK, tokenizer, lengths=(64, 128), per_length=3)
    write_synthetic(data, tmp_path / "passkey")
    assert read_synthetic(tmp_path / "passkey").items == data.items
    from lengthwise.evaluation.data import read_beir

    beir = read_beir(tmp_path / "passkey", "test")  # a plain BEIR reader takes the folder too
    assert len(beir.doc_ids) == len(data.items)


def test_bad_requests_are_errors(tokenizer, tmp_path: Path) -> None:
    with pytest.raises(LongDocError, match="per_length=500"):
        make_synthetic("passkey", HAYSTACK, tokenizer, lengths=(64,), per_length=500)
    with pytest.raises(LongDocError, match="task="):
        make_synthetic("haystack", HAYSTACK, tokenizer)  # type: ignore[arg-type]
    with pytest.raises(LongDocError, match="longdoc synth"):
        read_synthetic(tmp_path)


def test_scoring_ranks_within_groups_and_shares_ties(tokenizer) -> None:
    data = make_synthetic("passkey", HAYSTACK, tokenizer, lengths=(64, 128), per_length=4, seed=0)
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
    data = make_synthetic("needle", HAYSTACK, tokenizer, lengths=(64,), per_length=3, seed=0)
    queries = np.eye(4, dtype=np.float32)[:3]
    # document i has a noise window (axis 3) and its own window (axis i): the max finds it, the mean would too
    vectors = np.stack([v for i in range(3) for v in (np.eye(4)[3], np.eye(4)[i])]).astype(np.float32)
    documents = MultiVectors(vectors, np.arange(0, 7, 2))
    assert score_synthetic(data, queries, documents).mean == 100.0
