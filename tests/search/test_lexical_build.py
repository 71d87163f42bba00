"""The lexical side's streaming build (`lengthwise.search.lexical.bm25.LexicalIndex.build`, issue 35.6): its
files are the ones bm25s's in-memory ``BM25.index`` and ``save`` write (the same vocabulary, token ids, score matrix
and parameters), in one shard or many; an interrupted build resumes after its finished shards and ends as a clean
build does; a build of other inputs starts afresh and says so; a half-built folder is never opened."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import numpy as np
import pytest

from lengthwise.core.errors import SettingError
from lengthwise.longdoc.config import LongDocError
from lengthwise.search.lexical import bm25 as lexical
from lengthwise.search.lexical import shards as _bm25_build
from lengthwise.search.lexical.bm25 import LexicalIndex
from lengthwise.search.types import Granularity

pytest.importorskip("bm25s")
pytest.importorskip("Stemmer")

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"
BOILERPLATE = "This document is provided as is, without warranty of any kind. All rights reserved."
QUERIES = ["old mill river", "wheat barley rye", "warranty rights", "zanzibarite mineral", "the and of", "school"]


def _corpus() -> list[str]:
    """31 documents of 1 to 6 haystack lines, most closing on the same boilerplate; one empty, one of stop words
    only, one with a word no other holds, one with non-ASCII text."""
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    texts = [" ".join(lines[(i * 3 + j) % len(lines)] for j in range(1 + i % 6)) + " " + BOILERPLATE
             for i in range(28)]  # fmt: skip
    texts[5] += " The mineral zanzibarite was found under the old mill."
    texts[9] = "Ça coûte 12 € — naïve café, Zürich straße."
    return [*texts, "", "the of and it is was", BOILERPLATE]


def _lengths(texts: list[str]) -> np.ndarray:
    return np.asarray([len(text) for text in texts])


def _spans(texts: list[str]) -> list[np.ndarray]:
    """Windows of about 60 characters, overlapping by 20 (none for an empty text)."""
    out = []
    for text in texts:
        starts = range(0, max(len(text) - 20, 1), 40) if text else range(0)
        out.append(np.asarray([(s, min(s + 60, len(text))) for s in starts], dtype=np.int64).reshape(-1, 2))
    return out


def _bm25s_build(texts: list[str], spans: list[np.ndarray], granularity: str, folder: Path) -> None:
    """The reference: bm25s's own tokenizing, indexing and saving of every unit at once (the build before 35.6)."""
    import bm25s

    tokenizer = lexical._tokenizer("english")
    if granularity == "document":
        units = texts
    else:
        units = [text[s:e] for text, pairs in zip(texts, spans, strict=True) for s, e in pairs.tolist()]
    ids = [list(unit) for unit in tokenizer.streaming_tokenize(units, update_vocab=True)]
    retriever = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    retriever.index((ids, tokenizer.get_vocab_dict()), show_progress=False)
    retriever.save(str(folder), show_progress=False)
    tokenizer.save_vocab(str(folder))
    tokenizer.save_stopwords(str(folder))


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def shards(monkeypatch: pytest.MonkeyPatch) -> int:
    """Shards of 4 units: the 31 documents make 8 shards (27 in windows: about 7 windows a document)."""
    monkeypatch.setattr(_bm25_build, "SHARD_UNITS", 4)
    return 4


@pytest.mark.parametrize("granularity", ["document", "window"])
@pytest.mark.parametrize("shard_units", [4, 50_000])
def test_the_files_are_bm25s_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, granularity: str,
                                 shard_units: int) -> None:  # fmt: skip
    monkeypatch.setattr(_bm25_build, "SHARD_UNITS", shard_units)
    texts = _corpus()
    spans = _spans(texts)
    built = LexicalIndex.build(texts, spans, tmp_path / "lexical", granularity=granularity)
    _bm25s_build(texts, spans, granularity, tmp_path / "reference")
    ours, theirs = _files(tmp_path / "lexical" / "bm25"), _files(tmp_path / "reference")
    assert sorted(ours) == sorted(theirs)
    for name in theirs:  # the same vocabulary, token ids, parameters, units per term and scores, to the bit
        assert ours[name] == theirs[name], name
    import bm25s

    reference = bm25s.BM25.load(str(tmp_path / "reference"), mmap=True, show_progress=False)
    np.testing.assert_allclose(built.retriever.scores["data"], reference.scores["data"], rtol=1e-6)
    assert built.retriever.scores["num_docs"] == reference.scores["num_docs"] == built.settings["units"]
    for query in QUERIES:
        terms = built.query_tokens(query)
        if terms:
            np.testing.assert_allclose(built.retriever.get_scores(terms), reference.get_scores(terms), rtol=1e-6)
    assert [built.text(n) for n in range(len(texts))] == texts
    assert np.array_equal(built.spans, np.concatenate(spans))
    assert np.array_equal(built.window_offsets, np.concatenate([[0], np.cumsum([len(s) for s in spans])]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lexical", "reference"]  # no staging folder left


def test_one_shard_and_many_write_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts, granularity = _corpus(), Granularity.WINDOW
    LexicalIndex.build(texts, _spans(texts), tmp_path / "one", granularity=granularity)
    monkeypatch.setattr(_bm25_build, "SHARD_UNITS", 3)
    LexicalIndex.build(texts, _spans(texts), tmp_path / "many", granularity=granularity)
    assert _files(tmp_path / "one") == _files(tmp_path / "many")


def test_a_character_budget_closes_shards_too(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _corpus()
    monkeypatch.setattr(_bm25_build, "SHARD_CHARS", 500)
    bounds = _bm25_build._shard_bounds(_lengths(texts), np.ones(len(texts), dtype=np.int64))
    assert bounds[0] == 0 and bounds[-1] == len(texts) and len(bounds) > 3
    for first, last in itertools.pairwise(bounds):  # a shard closes on the document that reaches the budget
        assert sum(len(t) for t in texts[first : last - 1]) < 500
        assert last == len(texts) or sum(len(t) for t in texts[first:last]) >= 500


class Interrupted(KeyboardInterrupt):
    pass


def _interrupt_after(calls: int):  # type: ignore[no-untyped-def]
    """An on_progress that interrupts the build at its `calls`-th report (reports come at least at each shard's
    end, once that shard is recorded)."""
    seen = []

    def on_progress(done: int, total: int) -> None:
        seen.append(done)
        if len(seen) == calls:
            raise Interrupted

    return on_progress


@pytest.mark.parametrize("granularity", ["document", "window"])
def test_an_interrupted_build_resumes_after_its_finished_shards(
    tmp_path: Path, shards: int, tokenized_shards: list[int], granularity: str
) -> None:
    texts = _corpus()
    spans = _spans(texts)
    LexicalIndex.build(texts, spans, tmp_path / "clean", granularity=granularity)
    total = len(tokenized_shards)
    tokenized_shards.clear()
    out = tmp_path / "lexical"
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, spans, out, granularity=granularity, on_progress=_interrupt_after(3))
    assert len(tokenized_shards) == 3 and not out.exists()  # three shards done and recorded; no index yet
    staging = tmp_path / ".lexical-building"
    assert json.loads((staging / "build.json").read_text())["tokenized"] == 3
    with pytest.raises(LongDocError):
        LexicalIndex.open(staging)  # a half-built folder does not open
    tokenized_shards.clear()
    reports: list[tuple[int, int]] = []
    LexicalIndex.build(texts, spans, out, granularity=granularity, on_progress=lambda d, t: reports.append((d, t)))
    assert len(tokenized_shards) == total - 3  # the finished shards are not tokenized again
    assert reports[0][0] > 0 and reports[-1] == (len(texts), len(texts))  # progress starts where it resumed
    assert _files(out) == _files(tmp_path / "clean")
    assert not staging.exists()


def test_a_build_interrupted_in_pass_2_tokenizes_nothing_again(
    tmp_path: Path, shards: int, tokenized_shards: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _corpus()
    LexicalIndex.build(texts, _spans(texts), tmp_path / "clean", granularity="window")
    tokenized_shards.clear()
    real, filled = _bm25_build._fill_shard, []

    def interrupted(*args, **kwargs):  # type: ignore[no-untyped-def]
        filled.append(1)
        if len(filled) == 2:
            raise Interrupted
        return real(*args, **kwargs)

    monkeypatch.setattr(_bm25_build, "_fill_shard", interrupted)
    out = tmp_path / "lexical"
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, _spans(texts), out, granularity="window")
    total = len(tokenized_shards)
    monkeypatch.setattr(_bm25_build, "_fill_shard", real)
    tokenized_shards.clear()
    LexicalIndex.build(texts, _spans(texts), out, granularity="window")
    assert total > 2 and tokenized_shards == []
    assert _files(out) == _files(tmp_path / "clean")


@pytest.mark.parametrize("change", ["text", "k1", "granularity", "shard size", "spans"])
def test_a_build_of_other_inputs_starts_afresh_and_says_so(
    tmp_path: Path,
    shards: int,
    tokenized_shards: list[int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    change: str,
) -> None:
    texts = _corpus()
    spans = _spans(texts)
    out = tmp_path / "lexical"
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, spans, out, granularity="document", on_progress=_interrupt_after(3))
    settings: dict[str, object] = {"granularity": "document"}
    if change == "text":
        texts = [*texts[:-1], texts[-1] + " Appendix."]
        spans = _spans(texts)
    elif change == "spans":
        spans = [s[:1] for s in spans]
    elif change == "shard size":
        monkeypatch.setattr(_bm25_build, "SHARD_UNITS", 5)
    else:
        settings = {"granularity": "document", "k1": 1.2} if change == "k1" else {"granularity": "window"}
    tokenized_shards.clear()
    with caplog.at_level(logging.INFO, logger=lexical.__name__):
        built = LexicalIndex.build(texts, spans, out, **settings)  # type: ignore[arg-type]
    assert "starting afresh" in caplog.text and "resuming" not in caplog.text
    units = np.asarray([len(s) for s in spans]) if change == "granularity" else np.ones(len(texts), dtype=np.int64)
    assert len(tokenized_shards) == len(_bm25_build._shard_bounds(_lengths(texts), units)) - 1  # every shard anew
    LexicalIndex.build(texts, spans, tmp_path / "clean", **settings)  # type: ignore[arg-type]
    assert _files(out) == _files(tmp_path / "clean")
    assert built.text(len(texts) - 1) == texts[-1]


def test_the_same_inputs_resume_and_say_so(tmp_path: Path, shards: int, caplog: pytest.LogCaptureFixture) -> None:
    texts = _corpus()
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", granularity="document",
                           on_progress=_interrupt_after(2))  # fmt: skip
    with caplog.at_level(logging.INFO, logger=lexical.__name__):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", granularity="document")
    assert "resuming the lexical build, 2 of 8 shards already tokenized" in caplog.text


def test_the_encode_folders_digest_names_the_texts(tmp_path: Path, shards: int, tokenized_shards: list[int]) -> None:
    """Given the encode folder's digest, the build does not hash the texts itself: the digest names them."""
    texts = _corpus()
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", texts_sha256="a" * 64, granularity="document",
                           on_progress=_interrupt_after(2))  # fmt: skip
    tokenized_shards.clear()
    built = LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", texts_sha256="a" * 64,
                               granularity="document")  # fmt: skip
    assert len(tokenized_shards) == 6 and built.settings["texts_sha256"] == "a" * 64
    tokenized_shards.clear()
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", texts_sha256="a" * 64, granularity="document",
                           on_progress=_interrupt_after(2))  # fmt: skip
    LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", texts_sha256="b" * 64, granularity="document")
    assert len(tokenized_shards) == 2 + 8  # another digest: another corpus, built afresh


def test_an_interrupted_build_leaves_the_earlier_index_whole(tmp_path: Path, shards: int) -> None:
    texts = _corpus()
    out = tmp_path / "lexical"
    LexicalIndex.build(texts, _spans(texts), out, granularity="document")
    before = _files(out)
    with pytest.raises(Interrupted):
        LexicalIndex.build(texts, _spans(texts), out, granularity="window", on_progress=_interrupt_after(3))
    assert _files(out) == before and LexicalIndex.open(out).granularity is Granularity.DOCUMENT


def test_a_failed_build_removes_its_staging_folder(
    tmp_path: Path, shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error that is not an interruption leaves nothing to resume: the staging folder goes, as the dense build's."""

    def broken(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_bm25_build, "_fill_shard", broken)
    with pytest.raises(OSError, match="disk full"):
        LexicalIndex.build(_corpus(), _spans(_corpus()), tmp_path / "lexical")
    assert list(tmp_path.iterdir()) == []


def test_a_staging_folder_without_a_record_is_replaced(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from lengthwise.search.local.generations import mark

    staging = tmp_path / ".lexical-building"
    (staging / "shards").mkdir(parents=True)
    mark(staging)  # lengthwise's own, stopped before its record
    (staging / "texts.npy").write_bytes(b"half")
    texts = _corpus()
    with caplog.at_level(logging.WARNING, logger=lexical.__name__):
        built = LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical")
    assert "without its record" in caplog.text and built.text(0) == texts[0] and not staging.exists()


@pytest.mark.parametrize("name", [".lexical-building", ".lexical-replaced"])
def test_a_users_folder_by_a_staging_name_is_refused_not_removed(tmp_path: Path, name: str) -> None:
    """Issue 47.6: a folder named like the build's staging (or the aside of the folder it replaces) was removed
    with everything in it; only a folder carrying lengthwise's marker is removed now."""
    texts = _corpus()
    LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical")
    (tmp_path / name).mkdir()
    (tmp_path / name / "mine.txt").write_text("mine")
    with pytest.raises(SettingError, match=rf"{name} is in the way of the build's staging folder and lengthwise"):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical")
    assert (tmp_path / name / "mine.txt").read_text() == "mine"


def test_bad_settings_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    texts = _corpus()
    with pytest.raises(SettingError):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", k1=0)
    with pytest.raises(SettingError):
        LexicalIndex.build(texts, _spans(texts), tmp_path / "lexical", granularity="sentence")
    with pytest.raises(LongDocError):
        LexicalIndex.build(texts, _spans(texts)[:-1], tmp_path / "lexical")
    assert list(tmp_path.iterdir()) == []
