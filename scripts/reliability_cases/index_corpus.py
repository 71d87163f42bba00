"""Bad corpora and qrels around an index (issue 47.3-5 and its small gaps): judged documents that do not exist, a
corpus with other texts or one document short, an edited or deleted recorded corpus at build time, and `search
--queries` files with duplicate ids or that are not files. Each must end in one clear line (exit 2), never a score
or an index built from the wrong documents."""

from __future__ import annotations

import json
from pathlib import Path

from reliability_cases import Case, Context
from reliability_cases.longdoc import _encoded, _indexed

NO_MODEL = "/nonexistent/lengthwise-model"


def _rows(tmp: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in (tmp / "c.jsonl").read_text().splitlines()]


def _beir(tmp: Path, rows: list[dict[str, str]], judged: list[str]) -> None:
    """`rows` as the BEIR folder ``{tmp}/beir``, with qrels ``dev`` and ``test`` judging `judged` (one per query)."""
    beir = tmp / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    queries = [{"_id": f"q{n}", "text": f"the river and the old bridge {n}"} for n in range(len(judged))]
    (beir / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{n}\t{doc}\t1\n" for n, doc in enumerate(judged))
    for split in ("dev", "test"):
        (beir / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")


def _unknown_judged(tmp: Path, context: Context) -> None:
    """An index, and its corpus as BEIR whose qrels also judge two documents that exist nowhere."""
    _indexed(tmp, context)
    rows = _rows(tmp)
    _beir(tmp, rows, [row["_id"] for row in rows] + ["ghost1", "ghost2"])


def _other_texts(tmp: Path, context: Context) -> None:
    """An index, and its corpus as BEIR with one document's text changed (same ids)."""
    _indexed(tmp, context)
    rows = _rows(tmp)
    rows[2]["text"] += " and a new sentence"
    _beir(tmp, rows, [row["_id"] for row in rows])


def _one_short(tmp: Path, context: Context) -> None:
    """An index, and its corpus as BEIR without its first document."""
    _indexed(tmp, context)
    rows = _rows(tmp)[1:]
    _beir(tmp, rows, [row["_id"] for row in rows])


def _edited(tmp: Path, context: Context) -> None:
    """An encoded folder whose recorded corpus had one word edited since."""
    _encoded(tmp, context)
    corpus = tmp / "c.jsonl"
    corpus.write_text(corpus.read_text().replace("river", "stream", 1), encoding="utf-8")


def _gone_after_index(tmp: Path, context: Context) -> None:
    """A hybrid index, then its recorded corpus deleted."""
    _indexed(tmp, context)
    (tmp / "c.jsonl").unlink()


def _queries(text: str):
    def setup(tmp: Path, context: Context) -> None:
        _indexed(tmp, context)
        (tmp / "q.jsonl").write_text(text, encoding="utf-8")

    return setup


def _empty_id(tmp: Path, _: Context) -> None:
    rows = [{"_id": "a", "text": "the river"}, {"_id": "", "text": "the old bridge"}]
    (tmp / "c.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def _no_index(tmp: Path, _: str) -> str | None:
    return None if not (tmp / "i").exists() else "an index was written"


def _text_kept(tmp: Path, _: str) -> str | None:
    """The index still serves its lexical side."""
    from lengthwise.facade import LongIndex

    return None if LongIndex.open(tmp / "i").lexical is not None else "the lexical side was dropped"


def _untuned(tmp: Path, _: str) -> str | None:
    """Nothing was recorded in the index."""
    from lengthwise.facade import LongIndex

    lexical = LongIndex.open(tmp / "i").lexical
    return None if lexical is not None and "mode" not in lexical.settings else "a tuning was recorded"


_EVAL = ["eval", "-t", "retrieval", "-d", "{tmp}/beir", "--split", "test", "--index", "{tmp}/i"]
_TUNE = ["index", "tune", "{tmp}/i", "--data", "{tmp}/beir", "--split", "dev"]
_BUILD = ["index", "build", "{tmp}/e", "--out", "{tmp}/i"]
CASES: list[Case] = [
    Case("eval-index-judged-documents-unknown", "47.3", [*_EVAL, "--mode", "hybrid"], 2,
         "2 judged document ids are not in corpus.jsonl ('ghost1', 'ghost2')", _unknown_judged),
    Case("index-tune-judged-documents-unknown", "47.3", _TUNE, 2,
         "2 judged document ids are not in corpus.jsonl ('ghost1', 'ghost2')", _unknown_judged, _untuned),
    Case("index-tune-corpus-other-texts", "47.4", _TUNE, 2, "with other texts", _other_texts, _untuned),
    Case("eval-index-corpus-one-document-short", "47", _EVAL, 2, "1 indexed are not in", _one_short),
    Case("index-build-recorded-corpus-edited", "47.5", _BUILD, 2, "--text: not given", _edited, _no_index),
    Case("index-rebuild-recorded-corpus-gone-keeps-text", "47.5", _BUILD, 2, "would drop the lexical side",
         _gone_after_index, _text_kept),
    Case("search-queries-duplicate-ids", "47", ["search", "{tmp}/i", "--queries", "{tmp}/q.jsonl"], 2,
         "line 2: duplicate _id 'a' (first at line 1)",
         _queries('{"_id": "a", "text": "river"}\n{"_id": "a", "text": "bridge"}\n')),
    Case("search-queries-not-a-file", "47", ["search", "{tmp}/i", "--queries", "/dev/null"], 2,
         "/dev/null: not a regular file", _indexed),
    Case("encode-empty-document-id", "47", ["encode", "-d", "{tmp}/c.jsonl", "-o", "{tmp}/e", "-m", NO_MODEL], 2,
         "c.jsonl:2: an empty _id", _empty_id),
]  # fmt: skip
