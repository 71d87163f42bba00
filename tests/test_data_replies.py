"""The 20 Newsgroups thread-reconstruction set (`data/replies`, issue 49): the folder reads as a BEIR task with
disjoint dev and test halves, `make_replies.py` labels a reply by the lines it quotes and keeps none of them in the
query, and it rebuilds the folder byte for byte from the shared copy of the posts."""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from lengthwise.evaluation.data import read_beir

ROOT = Path(__file__).resolve().parents[1]
REPLIES = ROOT / "data" / "replies"
SOURCE = ROOT.parent / "shared" / "data" / "20newsgroups" / "train.jsonl.gz"


def _make_replies() -> Any:
    """The data folder's script, loaded as a module."""
    spec = importlib.util.spec_from_file_location("make_replies", REPLIES / "make_replies.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (REPLIES / "corpus.jsonl.gz").is_file(), reason="data/replies is not in this tree")
def test_replies_reads_with_disjoint_dev_and_test() -> None:
    splits = {split: read_beir(REPLIES, split) for split in ("dev", "test")}
    judged = {}
    for split, data in splits.items():
        ids = set(data.doc_ids)
        assert len(ids) == len(data.doc_ids)
        assert data.qrels and all(len(docs) == 1 for docs in data.qrels.values())  # one post quoted per reply
        judged[split] = {doc for docs in data.qrels.values() for doc in docs}
        assert judged[split] <= ids  # every judged post is in the corpus
    assert not set(splits["dev"].qrels) & set(splits["test"].qrels)
    assert not judged["dev"] & judged["test"]  # split by parent: no post judged in both halves


def _rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]


def _post(group: str, number: int, body: str) -> dict[str, str]:
    return {"id": f"train/{group}/{number}", "text": f"From: x@y\nSubject: s\n\n{body}"}


def test_make_replies_labels_by_quotes_and_keeps_no_quoted_line(tmp_path: Path) -> None:
    parent = ("The Quadra 800 crashes whenever the serial port driver loads.\n"
              "I replaced the logic board and the crashes continue every morning.\n"
              "Has anyone seen a Quadra with this particular serial driver problem?")  # fmt: skip
    reply = ("In article <1993Apr1.1@host> x@y (Someone) writes:\n"
             "> The Quadra 800 crashes whenever the serial port driver loads.\n"
             "> I replaced the logic board and the crashes continue every morning.\n\n"
             "Try zapping the parameter RAM and removing the modem init string from the control panel first, "
             "that fixed the same thing for me last year.\n-- \nSignature Person")  # fmt: skip
    repost = ("Quoted from elsewhere: a line that two posts hold word for word is no evidence.\n"
              "Another line that two posts hold word for word is no evidence either.")  # fmt: skip
    ambiguous = (
        "> Quoted from elsewhere: a line that two posts hold word for word is no evidence.\n"
        "> Another line that two posts hold word for word is no evidence either.\n"
        "So which of the two did this reply answer? Nobody can tell from the quoted lines alone here."
    )
    posts = [
        _post("comp.sys.mac", 1, parent),
        _post("comp.sys.mac", 2, reply),
        _post("misc", 3, repost),
        _post("misc", 4, repost),
        _post("misc", 5, ambiguous),
        _post("misc", 6, "> " + parent.splitlines()[0] + "\n> " + parent.splitlines()[1] + "\nMe too."),
    ]
    source = tmp_path / "posts.jsonl"
    source.write_text("".join(json.dumps(p) + "\n" for p in posts))
    counts = _make_replies().build(source, tmp_path)
    queries = _rows(tmp_path / "queries.jsonl.gz")
    corpus = {row["_id"] for row in _rows(tmp_path / "corpus.jsonl.gz")}
    assert [q["text"].split()[:3] for q in queries] == [["Try", "zapping", "the"]]  # "Me too." is too short
    text = queries[0]["text"]
    assert "Quadra" not in text and "writes" not in text and "Signature" not in text
    qrels = {split: (tmp_path / "qrels" / f"{split}.tsv").read_text().splitlines()[1:] for split in ("dev", "test")}
    assert sorted(qrels["dev"] + qrels["test"]) == [f"{queries[0]['_id']}\tcomp.sys.mac-1\t1"]
    assert "comp.sys.mac-1" in corpus and "comp.sys.mac-2" not in corpus and "misc-6" not in corpus  # queries out
    assert counts["parents"] == 1  # the reply to two identical posts labels neither


@pytest.mark.skipif(not SOURCE.is_file() or not (REPLIES / "corpus.jsonl.gz").is_file(),
                    reason="the shared 20 Newsgroups posts or data/replies are absent")  # fmt: skip
def test_make_replies_rebuilds_the_folder_byte_for_byte(tmp_path: Path) -> None:
    _make_replies().build(SOURCE, tmp_path)
    for name in ("corpus.jsonl.gz", "queries.jsonl.gz", "qrels/dev.tsv", "qrels/test.tsv"):
        assert (tmp_path / name).read_bytes() == (REPLIES / name).read_bytes(), name
