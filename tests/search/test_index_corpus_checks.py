"""The corpus an index is built, evaluated and tuned on (issue 47.3-5 and its small gaps): judged documents that do not
exist, a corpus with other texts or fewer documents, an edited or deleted recorded corpus at build time, the one
`LongIndex` class, and `search --queries` files with duplicate ids or that are not files. Each is refused in one line
(before the model loads where it can be) and never scored or built silently."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import DataFormatError, SettingError
from lengthwise.longdoc.config import LongDocError

from .conftest import encode_windows, haystack_rows

runner = CliRunner()


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """12 documents encoded multi-vector by the tiny BERT (``corpus.jsonl`` beside ``emb``)."""
    return encode_windows(tmp_path_factory.mktemp("checks"), haystack_rows(12), tiny_model_dir)


@pytest.fixture(scope="module")
def index(encoded: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A hybrid index of `encoded`, opened by the room's class with the loader passed in (as the CLI does)."""
    from lengthwise.facade import LongIndex, load_model

    out = tmp_path_factory.mktemp("idx") / "idx"
    LongIndex.build(encoded, out, quantize="none", engine="faiss", load_model=load_model)
    return LongIndex.open(out, load_model=load_model)


def _beir(folder: Path, rows: list[dict[str, str]], judged: list[str], split: str = "dev") -> Path:
    """`rows` as a BEIR folder whose query i asks for the document `judged[i]`."""
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    texts = {r["_id"]: r["text"] for r in rows}
    queries = [{"_id": f"q{i}", "text": " ".join(texts.get(doc, "the river bridge").split()[3:9])}
               for i, doc in enumerate(judged)]  # fmt: skip
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / f"{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{doc}\t1\n" for i, doc in enumerate(judged))
    )
    return folder


def _eval_config(beir: Path):  # type: ignore[no-untyped-def]
    from lengthwise.evaluation.config import EvalConfig

    return EvalConfig(task="retrieval", data=beir, split="dev")


def test_one_long_index_class_that_the_pipelines_take(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An index opened by the room's `LongIndex` (as the CLI and the service open it) is what `lengthwise.LongIndex`
    is, and `evaluate_through_index` and `tune_hybrid` take it (a raw TypeError before: it was not the facade's
    subclass)."""
    import lengthwise as lw
    from lengthwise.facade import LongIndex
    from lengthwise.pipelines import evaluate_through_index, tune_hybrid

    assert lw.LongIndex is LongIndex
    rows = haystack_rows(12)
    beir = _beir(tmp_path / "beir", rows, [r["_id"] for r in rows])
    record = evaluate_through_index(_eval_config(beir), index, mode="lexical")
    assert record["scores"]["ndcg@10"] > 0
    tuned = tune_hybrid(index, beir, split="dev", weights=(0.5,), save=False)
    assert set(tuned["scores"]) == {"dense", "lexical", "rrf", "convex-0.5", "zscore-0.5"}


def test_judged_documents_that_do_not_exist_are_refused_in_eval_and_tune(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two judged ids that are neither in the corpus nor in the index: refused in one line naming how many and which
    (they scored nDCG 80.66 instead of 100 before, and all-unknown qrels scored 0 and chose "dense")."""
    from lengthwise.evaluation.data import read_beir
    from lengthwise.pipelines import evaluate_through_index, tune_hybrid

    rows = haystack_rows(12)
    beir = _beir(tmp_path / "beir", rows, [r["_id"] for r in rows] + ["ghost1", "ghost2"])
    expected = r"2 judged document ids are not in corpus.jsonl \('ghost1', 'ghost2'\)"
    with pytest.raises(DataFormatError, match=expected):
        read_beir(beir, "dev")
    with pytest.raises(DataFormatError, match=expected):
        evaluate_through_index(_eval_config(beir), index, mode="hybrid")
    with pytest.raises(DataFormatError, match=expected):
        tune_hybrid(index, beir, split="dev", weights=(0.5,))
    assert "mode" not in index.lexical.settings  # nothing recorded
    run = runner.invoke(app, ["eval", "-t", "retrieval", "-d", str(beir), "--split", "dev", "--index",
                              str(index.folder), "--mode", "hybrid"])  # fmt: skip
    assert run.exit_code == 2 and "2 judged document ids" in run.output and "Traceback" not in run.output


def test_tune_refuses_a_corpus_with_other_texts_as_eval_does(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The same ids with one text changed: `index tune` tuned on it before, while `eval --index` refused it."""
    from lengthwise.pipelines import evaluate_through_index, tune_hybrid

    rows = haystack_rows(12)
    rows[3]["text"] += " and one more sentence"
    beir = _beir(tmp_path / "beir", rows, [r["_id"] for r in rows])
    for run in (lambda: tune_hybrid(index, beir, split="dev"),
                lambda: evaluate_through_index(_eval_config(beir), index)):  # fmt: skip
        with pytest.raises(SettingError, match=r"holds the ids of .* with other texts"):
            run()
    cli = runner.invoke(app, ["index", "tune", str(index.folder), "--data", str(beir), "--split", "dev"])
    assert cli.exit_code == 2 and "with other texts" in cli.output and "chosen" not in cli.output


def test_a_corpus_missing_one_indexed_document_is_counted_right(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """It said "0 of the 7 … are not among them" (the count of the corpus's documents missing from the index)."""
    from lengthwise.pipelines import evaluate_through_index, tune_hybrid

    rows = haystack_rows(12)[1:]
    beir = _beir(tmp_path / "beir", rows, [r["_id"] for r in rows])
    message = r"holds 12 documents and .* 11: 1 indexed are not in .*, 0 of .* are not indexed"
    with pytest.raises(SettingError, match=message):
        evaluate_through_index(_eval_config(beir), index)
    with pytest.raises(SettingError, match=message):
        tune_hybrid(index, beir, split="dev")


def _copy_encoded(encoded: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the encoded folder whose manifest records a copy of its corpus: (folder, corpus)."""
    moved, corpus = tmp_path / "emb", tmp_path / "corpus.jsonl"
    shutil.copytree(encoded, moved)
    shutil.copy(encoded.parent / "corpus.jsonl", corpus)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["settings"]["data"] = str(corpus)
    (moved / "manifest.json").write_text(json.dumps(manifest))
    return moved, corpus


def _no_model(*args: object, **kwargs: object) -> None:
    raise AssertionError("the model was loaded before the corpus was checked")


def test_an_edited_recorded_corpus_is_refused_naming_text(encoded: Path, tmp_path: Path) -> None:
    """One word of the recorded corpus edited: the build said the corpus "is gone" and built dense only (rc 0)."""
    from lengthwise.facade import LongIndex

    moved, corpus = _copy_encoded(encoded, tmp_path)
    corpus.write_text(corpus.read_text().replace("the", "a", 1))
    with pytest.raises(SettingError, match="has changed since: its digest") as caught:
        LongIndex.build(moved, tmp_path / "idx", quantize="none", engine="faiss", load_model=_no_model)
    assert caught.value.field == "text" and not (tmp_path / "idx").exists()
    run = runner.invoke(app, ["index", "build", str(moved), "--out", str(tmp_path / "idx"), "--engine", "faiss"])
    assert run.exit_code == 2 and "--text: not given" in run.output and "is gone" not in run.output


def test_a_dense_only_rebuild_never_drops_the_lexical_side_of_an_index(encoded: Path, tmp_path: Path) -> None:
    """The recorded corpus deleted after a hybrid build: a rebuild into the same folder removed its lexical side."""
    from lengthwise.facade import LongIndex, load_model

    moved, corpus = _copy_encoded(encoded, tmp_path)
    out = tmp_path / "idx"
    LongIndex.build(moved, out, quantize="none", engine="faiss", load_model=load_model)
    corpus.unlink()
    with pytest.raises(SettingError, match="would drop the lexical side of") as caught:
        LongIndex.build(moved, out, quantize="none", engine="faiss", load_model=_no_model)
    assert caught.value.field == "text"
    assert LongIndex.open(out).lexical is not None  # kept whole
    notes: list[str] = []  # into a new folder it is still a dense-only build, said so
    fresh = LongIndex.build(moved, tmp_path / "new", quantize="none", engine="faiss", on_note=notes.append)
    assert fresh.lexical is None and "is gone" in notes[0]


def test_an_empty_document_id_is_refused(tmp_path: Path) -> None:
    from lengthwise.evaluation.data import read_beir
    from lengthwise.longdoc.storage.store import corpus_digests

    rows = [{"_id": "a", "text": "one"}, {"_id": "", "text": "two"}]
    beir = _beir(tmp_path / "beir", rows, ["a"])
    with pytest.raises(LongDocError, match=r"corpus.jsonl:2: an empty _id"):
        corpus_digests(beir / "corpus.jsonl")
    with pytest.raises(DataFormatError, match=r"corpus.jsonl:2: an empty _id"):
        read_beir(beir, "dev")


def test_search_queries_duplicate_ids_and_non_files_are_refused(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two queries under one id were answered twice under it; `/dev/null` was "no such file"."""
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "a", "text": "river"}\n{"_id": "b", "text": "bridge"}\n{"_id": "a", "text": "mill"}\n')
    run = runner.invoke(app, ["search", str(index.folder), "--queries", str(queries)])
    assert run.exit_code == 2 and "line 3: duplicate _id 'a' (first at line 1)" in run.output
    run = runner.invoke(app, ["search", str(index.folder), "--queries", "/dev/null"])
    assert run.exit_code == 2 and "not a regular file" in run.output and "no such file" not in run.output
