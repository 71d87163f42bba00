"""Regression tests for the reader defects of issue 13 (items 1, 2, 5, 16, 17, 18): each failed before its fix."""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest

from lengthwise.core.data import read_pairs, read_qrels
from lengthwise.core.errors import DataFormatError


def _beir(folder: Path, docs: list[dict], qrels: str | None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    if qrels is not None:
        (folder / "qrels").mkdir(exist_ok=True)
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return folder


def _in_thread(function, timeout: float = 20.0):
    """Run `function` in a thread; fail (instead of hanging the suite) when it does not return in time."""
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = function()
        except BaseException as error:
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"no return after {timeout} s (a hang)"
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


# 13.1 -----------------------------------------------------------------------------------------------------------


def test_beir_two_documents_both_relevant_does_not_hang(tmp_path: Path) -> None:
    folder = _beir(
        tmp_path / "b", [{"_id": "a", "text": "first doc"}, {"_id": "b", "text": "second doc"}], "q\ta\t1\nq\tb\t1\n"
    )
    pairs = _in_thread(lambda: read_pairs(folder))
    assert [p.kind for p in pairs.pairs] == ["same_topic"]  # the only other pair is related: no random pair exists


def test_beir_random_pairs_never_repeat(tmp_path: Path) -> None:
    docs = [{"_id": f"d{i}", "text": f"document number {i}"} for i in range(5)]
    qrels = "".join(f"q{i}\td{j}\t1\n" for i in range(3) for j in range(5) if (i + j) % 3 == 0)
    folder = _beir(tmp_path / "b", docs, qrels)
    for seed in range(30):
        pairs = _in_thread(lambda seed=seed: read_pairs(folder, seed=seed))
        randoms = [frozenset((p.text1, p.text2)) for p in pairs.pairs if p.kind == "random"]
        assert len(randoms) == len(set(randoms)), f"seed {seed} repeats a random pair"
        same = {frozenset((p.text1, p.text2)) for p in pairs.pairs if p.kind == "same_topic"}
        assert not same & set(randoms)


# 13.2 -----------------------------------------------------------------------------------------------------------


def test_beir_with_one_relevant_document_per_query_is_an_error(tmp_path: Path) -> None:
    docs = [{"_id": f"d{i}", "text": f"argument {i}"} for i in range(6)]
    folder = _beir(tmp_path / "arguana", docs, "".join(f"q{i}\td{i}\t1\n" for i in range(6)))
    with pytest.raises(DataFormatError, match=r"arguana: no two documents share a topic .*'group' \(or 'topic'\)"):
        read_pairs(folder)


def test_beir_group_field_gives_same_group_pairs(tmp_path: Path) -> None:
    docs = [{"_id": f"d{i}", "text": f"argument {i}", "group": f"debate{i // 2}"} for i in range(6)]
    folder = _beir(tmp_path / "grouped", docs, "".join(f"q{i}\td{i}\t1\n" for i in range(6)))
    pairs = read_pairs(folder)
    same = {frozenset((p.text1, p.text2)) for p in pairs.pairs if p.kind == "same_group"}
    assert same == {frozenset((f"argument {2 * g}", f"argument {2 * g + 1}")) for g in range(3)}
    assert pairs.describe()["kinds"] == {"same_group": 3, "random": 3}


def test_jsonl_documents_with_topic_give_same_group_pairs(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    rows = [{"text": f"text {i}", "topic": i % 2} for i in range(6)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    pairs = read_pairs(path)
    assert pairs.fmt == "grouped"
    for pair in pairs.pairs:
        same_topic = int(pair.text1.split()[1]) % 2 == int(pair.text2.split()[1]) % 2
        assert same_topic == (pair.kind == "same_group")


# 13.5 -----------------------------------------------------------------------------------------------------------


def _csv_with_unbalanced_quote(path: Path) -> Path:
    rows = ["sentence1,sentence2,score", *(f"text a{i},text b{i},{i % 5}" for i in range(2, 7))]
    rows.append('"She said hi,He replied,3.0')  # line 7: the quote never closes where the field ends
    rows += [f'text a{i},"text b{i}",{i % 5}' for i in range(8, 12)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_csv_unbalanced_quote_names_file_and_line(tmp_path: Path) -> None:
    path = _csv_with_unbalanced_quote(tmp_path / "pairs.csv")
    with pytest.raises(DataFormatError, match=r"pairs\.csv:7: malformed CSV .*unbalanced quote"):
        read_pairs(path)


def test_eval_reads_sts_with_the_same_reader(tmp_path: Path) -> None:
    from lengthwise.evaluation.data import read_sts

    path = _csv_with_unbalanced_quote(tmp_path / "sts.csv")
    with pytest.raises(DataFormatError, match=r"sts\.csv:7: malformed CSV"):
        read_sts(path)


def test_qrels_reader_reads_beir_and_trec(tmp_path: Path) -> None:
    beir = tmp_path / "beir.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n", encoding="utf-8")
    trec = tmp_path / "trec.tsv"
    trec.write_text("q1\t0\td1\t2\n", encoding="utf-8")
    assert read_qrels(beir) == {"q1": {"d1": 1, "d2": 0}}
    assert read_qrels(trec) == {"q1": {"d1": 2}}
    (tmp_path / "bad.tsv").write_text("q1\td1\t1\nq2 d2 1\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.tsv:2: expected `query-id"):
        read_qrels(tmp_path / "bad.tsv")


# 13.16 ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pairs.tsv.gz", "pairs.jsonl.gz"])
def test_truncated_gzip_is_a_clear_error(tmp_path: Path, name: str) -> None:
    rows = "".join(f"first text {i}\tsecond text {i}\n" for i in range(3000))
    if name.endswith("jsonl.gz"):
        rows = "".join(json.dumps({"text1": f"a {i}", "text2": f"b {i}"}) + "\n" for i in range(3000))
    data = gzip.compress(rows.encode())
    path = tmp_path / name
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataFormatError, match=rf"{name}:\d+: the gzip data is truncated or corrupt"):
        read_pairs(path)


def test_not_gzip_at_all(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv.gz"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pairs\.tsv\.gz:1: the gzip data is truncated or corrupt"):
        read_pairs(path)


# 13.17 ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["pairs.tsv", "pairs.jsonl", "pairs.csv", "pairs.tsv.gz"])
def test_non_utf8_names_file_and_the_right_line(tmp_path: Path, name: str) -> None:
    good = (
        [json.dumps({"text1": f"a {i}", "text2": f"b {i}"}) for i in range(4)]
        if "jsonl" in name
        else [f"a {i}\tb {i}" for i in range(4)]
    )
    if name.endswith(".csv"):
        good = [f"a {i},b {i}" for i in range(4)]
    data = ("\n".join(good) + "\n").encode() + "caf\xe9\tna\xefve\n".encode("latin-1")  # line 5
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    with pytest.raises(DataFormatError, match=rf"{name.replace('.', '[.]')}:5: not UTF-8 text"):
        read_pairs(path)


def test_docs_reader_reports_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    from lengthwise.audit.documents.corpus import read_docs

    path = tmp_path / "docs.txt"
    path.write_bytes(("".join(f"document {i}\n" for i in range(4)) + "bad \xff byte\n").encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"docs\.txt:5: not UTF-8"):
        read_docs(path)


# 13.18 ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["\u200b\u200b", "\u200b \u200c\u200d", "\ufeff\u2060", "\x00\x01"])
def test_zero_width_only_text_names_file_and_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_text(f"fine\talso fine\nstill fine\t{text}\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"pairs\.tsv:2: second text has no visible character"):
        read_pairs(path)


def test_zero_width_only_document_names_file_and_line(tmp_path: Path) -> None:
    from lengthwise.audit.documents.corpus import read_docs

    path = tmp_path / "docs.jsonl"
    path.write_text('{"text": "fine"}\n{"text": "\\u200b\\u200b"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"docs\.jsonl:2: text has no visible character"):
        read_docs(path)


def test_directory_and_lone_carriage_returns(tmp_path: Path) -> None:
    path = tmp_path / "pairs.tsv"
    path.write_bytes(b"a\tb\rc\td\r\ne\tf\n")  # a lone CR ends a line, as universal newlines read it
    assert [(p.text1, p.text2) for p in read_pairs(path).pairs] == [("a", "b"), ("c", "d"), ("e", "f")]
    (tmp_path / "docs").mkdir()
    with pytest.raises(DataFormatError, match="is a directory"):
        from lengthwise.core._textio import open_text

        open_text(tmp_path / "docs")
