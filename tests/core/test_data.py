from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lengthwise.core.data import default_probe_pairs, read_pairs
from lengthwise.core.errors import DataFormatError


def test_reads_stsb_test_file(data_dir: Path) -> None:
    pairs = read_pairs(data_dir / "stsb/original/sts-test.csv.gz")
    assert len(pairs) == 1379
    assert pairs.pairs[0].text1 == "A girl is styling her hair."
    assert pairs.pairs[0].score == 2.5
    assert len(pairs.sha256) == 64


def test_reads_senteval_sts_input(data_dir: Path) -> None:
    pairs = read_pairs(data_dir / "sts12-16/original/STS12-en-test/STS.input.MSRvid.txt.gz")
    assert len(pairs) == 750


def test_reads_jsonl_tsv_and_csv_with_header(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl.gz"
    with gzip.open(jsonl, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"sentence1": "a b", "sentence2": "c d", "score": 3}) + "\n\n")
        handle.write(json.dumps({"text1": "e", "text2": "f", "kind": "same_topic"}) + "\n")
    got = read_pairs(jsonl)
    assert [(p.text1, p.text2, p.score, p.kind) for p in got.pairs] == [
        ("a b", "c d", 3.0, None),
        ("e", "f", None, "same_topic"),
    ]

    tsv = tmp_path / "p.tsv"
    tsv.write_text("one\ttwo\nthree\tfour\t4.5\n", encoding="utf-8")
    assert [p.score for p in read_pairs(tsv).pairs] == [None, 4.5]

    csv_file = tmp_path / "p.csv"
    csv_file.write_text('sentence1,sentence2,score\n"x, with comma",y,1\n', encoding="utf-8")
    assert read_pairs(csv_file).pairs[0].text1 == "x, with comma"


def test_same_pairs_same_fingerprint_across_formats(tmp_path: Path) -> None:
    (tmp_path / "a.tsv").write_text("one\ttwo\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"text1": "one", "text2": "two"}\n', encoding="utf-8")
    assert read_pairs(tmp_path / "a.tsv").sha256 == read_pairs(tmp_path / "b.jsonl").sha256


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.tsv", "a\tb\nonly-one-column\nc\td\n", r"bad\.tsv:2: cannot read a pair from 1 columns"),
        ("bad.jsonl", '{"text1": "a", "text2": "b"}\n{"text1": "a"\n', r"bad\.jsonl:2: not valid JSON"),
        ("keys.jsonl", '{"q": "a", "d": "b"}\n', r"keys\.jsonl:1: no text pair; use fields text1/text2"),
        ("empty.tsv", "a\tb\nc\t   \n", r"empty\.tsv:2: second text is empty or whitespace-only"),
        ("score.tsv", "a\tb\t3\nc\td\thigh\n", r"score\.tsv:2: score 'high' is not a number"),
        ("none.tsv", "\n\n", r"none\.tsv: no text pairs found"),
        ("huge.tsv", "a\tb\n" + "x" * 1_000_001 + "\ty\n", r"huge\.tsv:2: first text has 1,000,001 characters"),
        ("pairs.parquet", "x", r"unknown pairs format"),
    ],
    ids=["columns", "json", "keys", "empty", "score", "none", "huge", "format"],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataFormatError, match=message):
        read_pairs(path)


def test_csv_line_numbers_count_quoted_newlines(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('sentence1,sentence2\n"multi\nline",b\n"ok",\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"p\.csv:4: second text is empty"):
        read_pairs(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="no such file"):
        read_pairs(tmp_path / "nope.tsv")


def test_beir_folder_gives_same_topic_and_random_pairs(tmp_path: Path) -> None:
    docs = [{"_id": f"d{i}", "title": f"T{i}", "text": f"document {i}"} for i in range(10)]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels/test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td0\t1\nq1\td1\t1\nq1\td2\t1\nq2\td5\t1\nq3\td7\t1\nq3\td8\t0\n",
        encoding="utf-8",
    )
    pairs = read_pairs(tmp_path, seed=3)
    same = [p for p in pairs.pairs if p.kind == "same_topic"]
    rand = [p for p in pairs.pairs if p.kind == "random"]
    assert {frozenset((p.text1, p.text2)) for p in same} == {
        frozenset(("T0 document 0", "T1 document 1")),
        frozenset(("T0 document 0", "T2 document 2")),
        frozenset(("T1 document 1", "T2 document 2")),
    }
    assert len(rand) == 3
    assert all(frozenset((p.text1, p.text2)) not in {frozenset((s.text1, s.text2)) for s in same} for p in rand)
    assert pairs.describe()["kinds"] == {"same_topic": 3, "random": 3}


def test_real_beir_scifact(data_dir: Path) -> None:
    pairs = read_pairs(data_dir / "scifact", max_pairs=200)
    kinds = pairs.describe()["kinds"]
    assert kinds["same_topic"] > 20 and kinds["same_topic"] == kinds["random"]


def test_sample_is_seeded_subset(data_slices: Path) -> None:
    pairs = read_pairs(data_slices / "stsb/sts-test.csv.gz")  # STS-B test rows, checked in
    a, b = pairs.sample(50, seed=1), pairs.sample(50, seed=1)
    assert a.pairs == b.pairs and len(a) == 50
    assert set(a.pairs) <= set(pairs.pairs)
    assert pairs.sample(5000) is pairs


def test_default_probe_set() -> None:
    probes = default_probe_pairs()
    assert len(probes) >= 200
    assert len({(p.text1, p.text2) for p in probes.pairs}) == len(probes)
    scores = {p.score for p in probes.pairs}
    assert scores == {0.0, 1.0, 2.0, 3.0, 4.0}
    words = sorted(len(p.text1.split()) for p in probes.pairs)
    assert words[0] < 15 and words[-1] > 80  # short and long texts
    assert sum(p.text1.count(". ") >= 1 for p in probes.pairs) > 50  # multi-sentence texts
