from __future__ import annotations

import gzip
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.errors import DataFormatError
from lengthwise.evaluation.data import (
    LabelledTexts,
    document_text,
    read_beir,
    read_classification,
    read_labelled,
    read_senteval_sts,
    read_sts,
)
from lengthwise.evaluation.hub import load_hf_sts

from .conftest import write_jsonl


def _senteval(folder: Path) -> Path:
    folder.mkdir()
    (folder / "STS.input.news.txt").write_text("A cat sat.\tA cat was sitting.\nHi\tHello\nx\ty\n", encoding="utf-8")
    (folder / "STS.gs.news.txt").write_text("4.5\n\n1\n", encoding="utf-8")
    rows = "Q one\tQ uno\tsrc1\tsrc2\nQ two\tQ dos\tsrc1\tsrc2\n"
    (folder / "STS2016.input.qq.txt.gz").write_bytes(gzip.compress(rows.encode()))
    (folder / "STS2016.gs.qq.txt.gz").write_bytes(gzip.compress(b"2\n3\n"))
    return folder


def test_senteval_folder_skips_unscored_pairs_and_keeps_subsets(tmp_path: Path) -> None:
    pairs = read_senteval_sts(_senteval(tmp_path / "sts"))
    assert [(p.text1, p.score, p.kind) for p in pairs.pairs] == [
        ("A cat sat.", 4.5, "news"),
        ("x", 1.0, "news"),
        ("Q one", 2.0, "qq"),
        ("Q two", 3.0, "qq"),
    ]
    assert read_sts(tmp_path / "sts").sha256 == pairs.sha256


def test_senteval_bad_gold_names_file_and_line(tmp_path: Path) -> None:
    folder = _senteval(tmp_path / "sts")
    (folder / "STS.gs.news.txt").write_text("4.5\n\nabc\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"STS\.gs\.news\.txt:3: gold score 'abc'"):
        read_senteval_sts(folder)


def test_sts_file_without_scores_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\nc\td\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no gold score"):
        read_sts(path)


# MTEB's own descriptive statistics of its STS12–16 test sets (mteb/descriptive_stats/STS/STS1x.json):
# pairs, total characters of sentence1, total characters of sentence2.
MTEB_STS_STATS = {
    "STS12": (3108, 198256, 203862),
    "STS13": (1500, 93101, 68848),
    "STS14": (3750, 212331, 194854),
    "STS15": (3000, 173466, 172976),
    "STS16": (1186, 77704, 77098),
}


@pytest.mark.parametrize("name", sorted(MTEB_STS_STATS))
def test_senteval_tokenized_files_are_mtebs_sts_sets(data_dir: Path, name: str) -> None:
    pairs = read_sts(data_dir / "sts12-16" / "senteval_tokenized" / f"{name}-en-test")
    n, chars1, chars2 = MTEB_STS_STATS[name]
    assert len(pairs) == n
    # read_pairs strips each sentence; one STS14 sentence ends in a space (invisible to the tokenizer)
    assert abs(sum(len(p.text1) for p in pairs.pairs) - chars1) <= 1
    assert abs(sum(len(p.text2) for p in pairs.pairs) - chars2) <= 1


def test_original_sts12_files_differ_from_mtebs_text(data_dir: Path) -> None:
    pairs = read_sts(data_dir / "sts12-16" / "original" / "STS12-en-test")
    assert len(pairs) == 3108 and sum(len(p.text1) for p in pairs.pairs) != MTEB_STS_STATS["STS12"][1]


def test_stsb_and_sick_read_through_pairs(data_dir: Path) -> None:
    assert len(read_sts(data_dir / "stsb" / "original" / "sts-test.csv.gz")) == 1379
    sick = read_sts(data_dir / "sick" / "SICK_test_annotated.txt.gz")
    assert len(sick) == 4927 and all(1 <= p.score <= 5 for p in sick.pairs)  # type: ignore[operator]


def test_beir_folder(beir_folder: Path) -> None:
    data = read_beir(beir_folder)
    assert data.doc_texts == (
        "Cats Cats purr when they are content.",
        "Stock markets fell sharply on Monday.",
        "Rain It rained all day in the valley.",
    )
    assert data.query_ids == ("q1", "q2") and data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}
    assert document_text(None, " x ") == "x" and document_text("T", "") == "T"


def test_beir_malformed_corpus_line_names_file_and_line(beir_folder: Path) -> None:
    corpus = beir_folder / "corpus.jsonl.gz"
    corpus.write_bytes(gzip.compress(gzip.decompress(corpus.read_bytes()) + b"{not json\n"))
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl\.gz:4: not valid JSON"):
        read_beir(beir_folder)


def test_beir_errors(beir_folder: Path) -> None:
    (beir_folder / "qrels" / "test.tsv").write_text("q1\td1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test\.tsv:1: expected `query-id"):
        read_beir(beir_folder)
    (beir_folder / "qrels" / "test.tsv").write_text("q7\td1\t1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"not in queries\.jsonl"):
        read_beir(beir_folder)
    with pytest.raises(DataFormatError, match=r"no qrels/dev\.tsv"):
        read_beir(beir_folder, split="dev")


def test_scifact_is_mtebs_scifact(data_dir: Path) -> None:
    data = read_beir(data_dir / "scifact")
    assert (len(data.doc_ids), len(data.query_ids)) == (5183, 300)
    assert sum(len(docs) for docs in data.qrels.values()) == 339
    # MTEB's descriptive statistics of SciFact: 7,771,451 document characters (title + " " + text), 27,104 query
    assert sum(map(len, data.doc_texts)) == 7_771_451 and sum(map(len, data.query_texts)) == 27_104


def test_classification_folder_with_string_labels(labelled_folder: Path) -> None:
    train, test = read_classification(labelled_folder)
    assert train.label_names == test.label_names == ("food", "sport")
    assert np.bincount(train.labels).tolist() == [6, 6] and len(test) == 6


def test_labelled_integer_labels_take_names_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "test.jsonl", [{"text": "a", "label": 1}, {"text": "b", "label": 0}])
    (tmp_path / "label_names.json").write_text('["neg", "pos"]', encoding="utf-8")
    data = read_labelled(tmp_path / "test.jsonl")
    assert data.label_names == ("neg", "pos") and data.labels.tolist() == [1, 0]


def test_labelled_errors_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "a", "label": 0}\n{"text": "b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"x\.jsonl:2: expected a JSON object with fields text, label"):
        read_labelled(path)
    path.write_text('{"text": "a", "label": 0}\n{"text": "b", "label": 5}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"x\.jsonl:2: label 5 is not one of the 2 classes"):
        read_labelled(path, label_names=("a", "b"))


def test_stratified_sample_keeps_class_proportions() -> None:
    labels = np.asarray([0] * 80 + [1] * 20)
    data = LabelledTexts(tuple(f"t{i}" for i in range(100)), labels, ("a", "b"), "mem")
    sample = data.stratified_sample(10, seed=1)
    assert np.bincount(sample.labels).tolist() == [8, 2]
    assert sample.texts == data.stratified_sample(10, seed=1).texts
    assert data.stratified_sample(1000) is data


def test_hub_sts_loader_maps_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def load_dataset(path: str, *args: str, split: str) -> list[dict]:
        calls.append((path, args, split))
        return [{"sentence1": "a", "sentence2": "b", "score": 3}, {"sentence1": "c", "sentence2": "d", "score": 1}]

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    pairs = load_hf_sts("mteb/stsbenchmark-sts")
    assert calls == [("mteb/stsbenchmark-sts", (), "test")] and [p.score for p in pairs.pairs] == [3.0, 1.0]


def test_hub_failure_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def load_dataset(*args: object, **kwargs: object) -> None:
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    with pytest.raises(DataFormatError, match=r"hf:org/set: could not load split 'test'.*local path"):
        load_hf_sts("org/set")
