"""Training data readers: every supported format, the shared data sets, and one-line errors for bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lengthwise.core.errors import DataFormatError
from lengthwise.training.data import read_training_data


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_one_text_per_line_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "texts.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write("first line\n\nsecond line\n")
    data = read_training_data(path)
    assert data.kind == "text" and data.texts == ("first line", "second line")


def test_jsonl_pairs_keep_only_positive_labels(tmp_path: Path) -> None:
    rows = [
        {"sentence1": "a", "sentence2": "b", "label": 1},
        {"sentence1": "c", "sentence2": "d", "label": 0},
        {"sentence1": "e", "sentence2": "f", "label": None},
        {"premise": "g", "hypothesis": "h", "label": "entailment"},
        {"anchor": "i", "positive": "j"},
    ]
    data = read_training_data(_jsonl(tmp_path / "pairs.jsonl", rows))
    assert data.pairs == (("a", "b"), ("g", "h"), ("i", "j"))


def test_captions_become_disjoint_pairs(tmp_path: Path) -> None:
    data = read_training_data(_jsonl(tmp_path / "c.jsonl", [{"image": "x", "captions": ["1", "2", "3", "4", "5"]}]))
    assert data.pairs == (("1", "2"), ("3", "4"))


def test_bad_input_gets_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no such file"):
        read_training_data(tmp_path / "missing.txt")
    with pytest.raises(DataFormatError, match=r"mixed\.jsonl.*both single texts and pairs"):
        read_training_data(_jsonl(tmp_path / "mixed.jsonl", [{"text": "a"}, {"anchor": "b", "positive": "c"}]))
    with pytest.raises(DataFormatError, match=r"empty\.jsonl:2: text is empty"):
        read_training_data(_jsonl(tmp_path / "empty.jsonl", [{"text": "a"}, {"text": "  "}]))
    with pytest.raises(DataFormatError, match=r"odd\.jsonl:1: no `text`"):
        read_training_data(_jsonl(tmp_path / "odd.jsonl", [{"body": "a"}]))
    (tmp_path / "nothing.txt").write_text("\n\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no training examples"):
        read_training_data(tmp_path / "nothing.txt")


def test_max_examples_is_a_seeded_ordered_sample(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("".join(f"line {i}\n" for i in range(100)), encoding="utf-8")
    first = read_training_data(path, max_examples=10, seed=1)
    assert first == read_training_data(path, max_examples=10, seed=1)
    assert len(first) == 10 and list(first.texts) == sorted(first.texts, key=lambda t: int(t.split()[1]))
    assert first.sha256 != read_training_data(path, max_examples=10, seed=2).sha256


def test_saved_hf_dataset_folder(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"anchor": ["a", "b"], "positive": ["c", "d"]}).save_to_disk(str(tmp_path / "ds"))
    assert read_training_data(tmp_path / "ds").pairs == (("a", "c"), ("b", "d"))


@pytest.mark.parametrize(
    ("relative", "kind", "count"),
    [
        ("mrpc/msr_paraphrase_train.txt.gz", "pair", 2753),  # Quality = 1 rows (MANIFEST)
        ("twitter_url_corpus/test.jsonl.gz", "pair", 1821),  # label 1 (>= 4 votes)
        ("snli_senteval/dev.jsonl.gz", "pair", 3329),  # entailment pairs
        ("flickr8k_captions/captions_by_image.jsonl.gz", "pair", 2 * 8092),
        ("wiki1m_simcse_head/wiki1m_for_simcse.head11914.txt.gz", "text", 11914),
        ("scifact", "text", 5183),  # BEIR corpus
    ],
)
def test_shared_data_sets(data_dir: Path, relative: str, kind: str, count: int) -> None:
    data = read_training_data(data_dir / relative)
    assert data.kind == kind and len(data) == count
