"""A JSONL row's text and id of the wrong JSON type (issue 62.9): ``"text": 123`` was refused as "empty or
whitespace-only", and ``"_id": null`` was read as the id ``None``. Each reader that takes them (a corpus for `encode`,
`search --queries`, a BEIR folder) now says what the value is and what to give."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import DataFormatError

runner = CliRunner()
NO_MODEL = "/nonexistent/lengthwise-model"  # every check here comes before a model loads


def _jsonl(path: Path, *rows: dict) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "said"),
    [(123, "'text' is a number, not a string; give the text as a JSON string"),
     (["a", "b"], "'text' is a list, not a string; give the text as a JSON string"),
     (None, "'text' is missing or null; remove the row or fill it in"),
     ("   ", "'text' is empty or whitespace-only; remove the row or fill it in")],
)  # fmt: skip
def test_a_text_of_another_type_is_named_as_such(tmp_path: Path, text: object, said: str) -> None:
    from lengthwise.core._textio import checked_text

    with pytest.raises(DataFormatError, match=rf"^c\.jsonl:2: {said}$"):
        checked_text("c.jsonl", 2, text, "'text'")


def test_a_corpus_and_a_queries_file_with_a_number_as_text(tmp_path: Path) -> None:
    corpus = _jsonl(tmp_path / "c.jsonl", {"_id": "a", "text": "the river"}, {"_id": "b", "text": 123})
    run = runner.invoke(app, ["encode", "-d", str(corpus), "-o", str(tmp_path / "e"), "-m", NO_MODEL])
    assert run.exit_code == 2 and "c.jsonl:2: 'text' is a number, not a string" in " ".join(run.output.split())
    from lengthwise.cli.index import _queries

    with pytest.raises(DataFormatError, match=r"c\.jsonl:2: 'text' is a number, not a string"):
        _queries(None, corpus)


@pytest.mark.parametrize("key", ["_id", "id"])
def test_a_null_id_is_refused_in_a_corpus(tmp_path: Path, key: str) -> None:
    """It was read as the id "None"."""
    from lengthwise.longdoc.storage.store import corpus_digests

    corpus = _jsonl(tmp_path / "c.jsonl", {"_id": "a", "text": "the river"}, {key: None, "text": "the old bridge"})
    with pytest.raises(DataFormatError, match=rf"c\.jsonl:2: {key} is null; give every document its own id"):
        corpus_digests(corpus)
    run = runner.invoke(app, ["encode", "-d", str(corpus), "-o", str(tmp_path / "e"), "-m", NO_MODEL])
    assert run.exit_code == 2 and f"c.jsonl:2: {key} is null" in " ".join(run.output.split())


@pytest.mark.parametrize(("value", "kind"), [(None, "null"), (True, "a boolean"), ({"a": 1}, "an object")])
def test_an_id_that_is_no_string_or_integer_is_refused_in_a_queries_file(
    tmp_path: Path, value: object, kind: str
) -> None:
    from lengthwise.cli.index import _queries

    queries = _jsonl(tmp_path / "q.jsonl", {"_id": "q1", "text": "river"}, {"_id": value, "text": "bridge"})
    with pytest.raises(DataFormatError, match=rf"q\.jsonl:2: _id is {kind}; give every query its own id"):
        _queries(None, queries)


def test_integer_ids_are_still_read_as_their_digits(tmp_path: Path) -> None:
    from lengthwise.cli.index import _queries
    from lengthwise.longdoc.storage.store import corpus_digests

    rows = ({"_id": 7, "text": "the river"}, {"id": 8, "text": "the old bridge"}, {"text": "no id: the line"})
    assert list(corpus_digests(_jsonl(tmp_path / "c.jsonl", *rows))) == ["7", "8", "3"]
    assert [q for q, _ in _queries(None, _jsonl(tmp_path / "q.jsonl", *rows))] == ["7", "8", "3"]


def test_a_beir_folder_with_a_null_id_is_refused(tmp_path: Path) -> None:
    from lengthwise.evaluation.data import read_beir

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    _jsonl(beir / "corpus.jsonl", {"_id": "d1", "text": "the river"}, {"_id": None, "text": "the old bridge"})
    _jsonl(beir / "queries.jsonl", {"_id": "q1", "text": "river"})
    (beir / "qrels" / "test.tsv").write_text("q1\td1\t1\n")
    with pytest.raises(DataFormatError, match=r"corpus\.jsonl:2: _id is null; give every document its own id"):
        read_beir(beir)
    _jsonl(beir / "corpus.jsonl", {"_id": "d1", "text": "the river"})
    _jsonl(beir / "queries.jsonl", {"_id": "q1", "text": "river"}, {"_id": None, "text": "bridge"})
    with pytest.raises(DataFormatError, match=r"queries\.jsonl:2: _id is null; give every query its own id"):
        read_beir(beir)
