"""The build of an index with its text side (issue 35.6): both sides are staged together and swapped in together,
so a build stopped in its lexical part serves nothing half-built, keeps an earlier index whole, and resumes on the
next run without building the dense side again; the text is read from the corpus file as the build goes (any
order, gzipped or not), checked against the index, and never held whole."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.longdoc.config import LongDocError
from lengthwise.search.local.files import served_files

from .conftest import encode_windows, haystack_rows

pytest.importorskip("bm25s")
pytest.importorskip("faiss")

runner = CliRunner()


def _rows() -> list[dict[str, str]]:
    return haystack_rows()


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    text = "".join(json.dumps(row) + "\n" for row in rows)
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 documents encoded multi-vector in 24-token windows (stride 12) by the tiny BERT, with their corpus."""
    return encode_windows(tmp_path_factory.mktemp("build"), _rows(), tiny_model_dir)


@pytest.fixture(scope="module")
def clean(encoded: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The index built in one go (FAISS: its build is deterministic, so files can be compared byte for byte)."""
    import lengthwise as lw

    return lw.LongIndex.build(encoded, tmp_path_factory.mktemp("clean") / "idx", quantize="none", engine="faiss")


@pytest.fixture
def shards(monkeypatch: pytest.MonkeyPatch, tokenized_shards: list[int]) -> list[int]:
    """Lexical shards of 5 documents (24 documents: 5 shards); the list grows by one per shard tokenized."""
    from lengthwise.search.lexical import shards as _bm25_build

    monkeypatch.setattr(_bm25_build, "SHARD_UNITS", 5)
    return tokenized_shards


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _index(folder: Path) -> dict[str, object]:
    """The files of the index at `folder`: its served generation's and its index.json, without the generation's id
    (a random name, different in every build)."""
    files = {name: data for name, data in _files(served_files(folder)).items() if not name.endswith(".json")}
    for name in ("index.json", "lexical/lexical.json"):
        path = folder / name if name == "index.json" else served_files(folder) / name
        files[name] = {k: v for k, v in json.loads(path.read_text()).items() if k != "generation"}
    return files


def _stop_at_shard(monkeypatch: pytest.MonkeyPatch, shard: int) -> None:
    """Ctrl-C when the lexical build starts tokenizing its shard number `shard` (from 0)."""
    from lengthwise.search.lexical import shards as _bm25_build

    real, seen = _bm25_build._tokenize_shard, []

    def stopped(tokenizer, units):  # type: ignore[no-untyped-def]
        seen.append(1)
        if len(seen) == shard + 1:
            raise KeyboardInterrupt
        return real(tokenizer, units)

    monkeypatch.setattr(_bm25_build, "_tokenize_shard", stopped)


def test_a_build_stopped_in_its_lexical_side_resumes_there_through_the_cli(
    encoded: Path, clean, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[int]
) -> None:  # type: ignore[no-untyped-def]
    """Before, the rerun built the dense index again and dropped the lexical staging: the lexical build resumed
    only when `LexicalIndex.build` was called by hand."""
    from lengthwise.search.lexical import shards as _bm25_build
    from lengthwise.search.local import build as build_module
    from lengthwise.search.local import files as index_files

    out = tmp_path / "idx"
    args = ["index", "build", str(encoded), "--out", str(out), "--quantize", "none", "--engine", "faiss"]
    counted = _bm25_build._tokenize_shard
    _stop_at_shard(monkeypatch, 2)
    run = runner.invoke(app, args)
    assert run.exit_code == 130, run.output
    assert "run the same command again to resume" in run.output
    staging = tmp_path / ".idx-building"
    assert not out.exists()  # nothing half-built is served
    assert (staging / "index.json").is_file()  # the dense side is complete in the staging folder
    assert json.loads((staging / ".lexical-building" / "build.json").read_text())["tokenized"] == 2

    def again(*_: object) -> None:
        raise AssertionError("the dense side was built again")

    monkeypatch.setattr(index_files, "unit_vectors", again)
    monkeypatch.setattr(build_module, "fill_engine", again)  # the name _build.py calls
    monkeypatch.setattr(_bm25_build, "_tokenize_shard", counted)
    shards.clear()
    run = runner.invoke(app, args)
    assert run.exit_code == 0, run.output
    # of the 19 (the default granularity, both: 14 of windows, then 5 of whole documents), the two finished are not
    # redone
    assert len(shards) == 17
    assert _index(out) == _index(Path(clean.folder))  # the same index as a build in one go, byte for byte
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_an_earlier_index_is_served_whole_until_the_new_one_is_built(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[int]
) -> None:
    import lengthwise as lw

    out = tmp_path / "idx"
    lw.LongIndex.build(encoded, out, quantize="none", engine="faiss", granularity="document")
    before = _files(out)
    _stop_at_shard(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        lw.LongIndex.build(encoded, out, quantize="none", engine="faiss", granularity="window")
    assert _files(out) == before  # before, the new dense index had replaced it, without its text
    index = lw.LongIndex.open(out)
    assert index.lexical is not None and index.lexical.settings["granularity"] == "document"
    assert index.search("the old mill", k=2, mode="lexical")[0]


def test_a_build_without_its_text_drops_a_stopped_lexical_build(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: list[int]
) -> None:
    """The same dense build run again without text (the recorded corpus gone) is dense only: nothing of the
    stopped text side goes into the index."""
    import shutil

    import lengthwise as lw

    moved = tmp_path / "emb"
    shutil.copytree(encoded, moved)
    _stop_at_shard(monkeypatch, 1)
    with pytest.raises(KeyboardInterrupt):
        lw.LongIndex.build(
            moved, tmp_path / "idx", quantize="none", engine="faiss", text=encoded.parent / "corpus.jsonl"
        )
    assert (tmp_path / ".idx-building" / ".lexical-building").is_dir()
    manifest = json.loads((moved / "manifest.json").read_text())
    (moved / "manifest.json").write_text(json.dumps({**manifest, "settings": {**manifest["settings"], "data": "gone"}}))
    notes: list[str] = []
    index = lw.LongIndex.build(moved, tmp_path / "idx", quantize="none", engine="faiss", on_note=notes.append)
    assert index.lexical is None and "built without text" in notes[0]
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == [index.files.name, "index.json"]
    assert sorted(p.name for p in index.files.iterdir()) == sorted(
        ["vectors.npy", "offsets.npy", "ids.txt", "members.npy", "member_starts.npy", "engine.faiss", "readers.lock"]
    )


def _text_side(clean, corpus: Path, out: Path, recorded: str | None):  # type: ignore[no-untyped-def]
    """`build_text_side` for the clean index's documents from `corpus`, into `out / "lexical"`."""
    from lengthwise.longdoc.config import LongDocConfig
    from lengthwise.longdoc.encoder import LongEncoder
    from lengthwise.longdoc.method import DocumentCut
    from lengthwise.search.lexical.build import build_text_side

    encoder = LongEncoder(clean.model, LongDocConfig.from_dict(clean.settings["encode_settings"]["long"]))
    windows = SimpleNamespace(doc_ids=clean.doc_ids, offsets=clean.offsets, folder=out, files=out,
                              settings={"generation": clean.settings["generation"]})  # fmt: skip
    return build_text_side(windows, DocumentCut(encoder), corpus, recorded=recorded)


@pytest.mark.parametrize("name", ["shuffled.jsonl", "shuffled.jsonl.gz"])
def test_the_text_is_read_from_a_corpus_in_any_order(clean, tmp_path: Path, shards: list[int], name: str) -> None:  # type: ignore[no-untyped-def]
    """A corpus encoded by several workers, or repaired, is indexed in another order than its file holds."""
    from lengthwise.longdoc.storage.store import TEXTS

    rows = _rows()
    random.Random(0).shuffle(rows)
    corpus = _write(tmp_path / name, rows)
    built = _text_side(clean, corpus, tmp_path, clean.settings["encode_settings"][TEXTS])
    assert len(shards) == 19  # both granularities' shards (14 of windows, 5 of whole documents), each tokenized once
    theirs = _files(clean.files / "lexical")
    assert {k: v for k, v in _files(built.folder).items() if k != "lexical.json"} == {
        k: v for k, v in theirs.items() if k != "lexical.json"
    }
    assert built.window.settings == json.loads(theirs["lexical.json"])  # both sides: the window side records


def test_missing_extra_or_changed_text_is_one_line_and_leaves_nothing(clean, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from lengthwise.search.lexical import texts as _text_source

    rows = _rows()
    short = _write(tmp_path / "short.jsonl", rows[1:])
    with pytest.raises(LongDocError, match=r"short.jsonl: 1 of the index's 24 documents are missing from it and 0"):
        _text_side(clean, short, tmp_path, None)
    extra = _write(tmp_path / "extra.jsonl", [*rows, {"_id": "new", "text": "a new document"}])
    with pytest.raises(LongDocError, match=r"extra.jsonl: 0 of the index's 24 .* and 1 of its documents are not"):
        _text_side(clean, extra, tmp_path, None)
    corpus = _write(tmp_path / "corpus.jsonl", rows)
    measured = _text_source._measured

    def changed_after(path: Path, place: dict[str, int]) -> object:  # the file changes between the two passes
        found = measured(path, place)
        _write(path, [*rows[:3], {**rows[3], "text": rows[3]["text"] + " More."}, *rows[4:]])
        return found

    monkeypatch.setattr(_text_source, "_measured", changed_after)
    with pytest.raises(LongDocError, match=r"corpus.jsonl: document 'doc3' changed while the index was being built"):
        _text_side(clean, corpus, tmp_path, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "extra.jsonl", "short.jsonl"]
