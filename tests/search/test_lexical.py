"""Hybrid long-document search (`lengthwise.search.lexical.bm25`, `lengthwise.search.fusion`,
`LongIndex.search(mode=, passages=)`): the lexical side indexes the encoded corpus's text, the fusion ranks as an exact
fused scan does, hits carry the passages that scored, and bad input is refused in one line before any model load."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.core.fusion import Fusion, Mode
from lengthwise.longdoc.config import LongDocError
from lengthwise.search.exact import exact_fused
from lengthwise.search.fusion import fuse
from lengthwise.search.types import FusionSettings, Hit

from .conftest import encode_windows, haystack_rows

runner = CliRunner()
RARE = "zanzibarite"  # a word only one document holds


def _rows() -> list[dict[str, str]]:
    rows = haystack_rows()
    rows[7]["text"] += f" The mineral {RARE} was found under the old mill."
    return rows


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 documents encoded multi-vector in 24-token windows (stride 12) by the tiny BERT, with their corpus."""
    return encode_windows(tmp_path_factory.mktemp("lexical"), _rows(), tiny_model_dir)


@pytest.fixture(scope="module")
def index(encoded: Path, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import lengthwise as lw

    return lw.LongIndex.build(encoded, tmp_path_factory.mktemp("idx") / "idx", quantize="none", engine="faiss")


def test_the_index_holds_the_text_and_each_windows_span(index, encoded: Path) -> None:  # type: ignore[no-untyped-def]
    rows = {row["_id"]: row["text"] for row in _rows()}
    lexical = index.lexical
    assert lexical is not None and lexical.settings["documents"] == 24
    assert [lexical.text(n) for n in range(24)] == [rows[i] for i in index.doc_ids]
    assert len(lexical.window.spans) == len(index.vectors)  # one span per window row


def test_lexical_search_finds_the_rare_word_and_bm25_scores_match_bm25s(index) -> None:  # type: ignore[no-untyped-def]
    hits = index.search(f"where was {RARE} found", k=3, mode="lexical")[0]
    assert hits[0].id == "doc7" and hits[0].lexical == pytest.approx(hits[0].score) and hits[0].dense is None
    import bm25s
    import Stemmer

    # the default granularity holds both sides; its window side: BM25 over the windows' text, a document scoring its
    # best window (a lexical search's and each hit's lexical score)
    assert index.lexical.settings["granularity"] == "both"
    assert index.lexical.window.settings["granularity"] == "window"
    offsets, spans = index.lexical.window.window_offsets, index.lexical.window.spans
    windows = [index.lexical.text(n)[a:b] for n in range(24) for a, b in spans[offsets[n] : offsets[n + 1]]]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(windows, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    query = bm25s.tokenize([f"where was {RARE} found"], stopwords="en", stemmer=stemmer, show_progress=False)
    rows, scores = retriever.retrieve(query, k=len(windows), show_progress=False)
    by_window = np.zeros(len(windows))
    by_window[rows[0]] = scores[0]
    best = np.maximum.reduceat(by_window, offsets[:-1])
    assert index.doc_ids[int(np.argmax(best))] == "doc7"
    assert hits[0].score == pytest.approx(float(best.max()), rel=1e-5)


@pytest.mark.parametrize("fusion", ["convex", "rrf", "zscore", "minmax", "dbsf", "adaptive"])
def test_hybrid_ranks_as_an_exact_fused_scan(index, fusion: str) -> None:  # type: ignore[no-untyped-def]
    settings = FusionSettings(Fusion(fusion), weight=0.3, depth=5)
    searcher = index.searcher
    queries = ["the river and the old bridge", f"{RARE} under the mill", "a keyboard with a broken key"]
    vectors = np.asarray(index.embed_queries(queries))
    found = searcher.rank(vectors, queries, 5, Mode.HYBRID, settings, candidates=10_000, probes=10_000)
    for row, query, text in zip(found, vectors, queries, strict=True):
        unit = torch.nn.functional.normalize(torch.as_tensor(query), dim=-1)
        exact = exact_fused(searcher, unit, text, 5, settings)
        if fusion != "rrf":  # convex: set-independent; the others: every document is a candidate (24 < 10·k)
            assert [hit.id for hit in row] == exact
        else:  # ranks within the proposals: the top document agrees
            assert row[0].id == exact[0]
        assert all(hit.dense is not None and hit.lexical is not None for hit in row)


def test_convex_fusion_is_the_weighted_sum_of_normalised_sides() -> None:
    dense, lexical = np.array([0.8, 0.2, -0.2]), np.array([0.0, 4.0, 2.0])
    fused = fuse(dense, lexical, FusionSettings(Fusion.CONVEX, weight=0.25))
    expected = 0.75 * (dense + 1) / 1.8 + 0.25 * lexical / 4.0
    np.testing.assert_allclose(fused, expected)
    assert fuse(dense, np.zeros(3), FusionSettings(weight=0.5)).argmax() == 0  # no query term: dense decides


def test_each_hit_carries_the_windows_that_scored(index, tiny_model_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """A passage is the window whose vector scored: its text, embedded again in the same window, gives that
    window's vector (for a span starting at a word, where the text's own tokens begin the window)."""
    from lengthwise.longdoc import LongDocConfig, LongEncoder

    query = "the river and the old bridge"
    hits = index.search(query, k=4, mode="dense", passages=3)[0]
    assert all(isinstance(hit, Hit) and 1 <= len(hit.passages) <= 3 for hit in hits)
    unit = torch.nn.functional.normalize(torch.as_tensor(np.asarray(index.embed_queries([query]))[0]), dim=-1)
    encoder = LongEncoder(index.model, LongDocConfig(strategy="truncate", window=24))
    checked = 0
    for hit in hits:
        doc = index.doc_ids.index(hit.id)
        first = int(index.offsets[doc])
        scores = [p.score for p in hit.passages]
        assert scores == sorted(scores, reverse=True)
        assert hit.passages[0].score == pytest.approx(hit.score, abs=1e-5)  # max scoring: the best window is the hit
        body = index.lexical.text(doc)
        for passage in hit.passages:
            assert passage.text == body[passage.start : passage.end]
            window = np.asarray(index.vectors[first + passage.window])
            assert float(torch.as_tensor(window) @ unit) / float(np.linalg.norm(window)) == pytest.approx(
                passage.score, abs=1e-5
            )
            if passage.start == 0 or body[passage.start - 1] == " ":
                again = np.asarray(encoder.encode_documents([passage.text]))[0]
                cosine = float(again @ window / np.linalg.norm(again) / np.linalg.norm(window))
                assert cosine > 0.999, (passage, cosine)
                checked += 1
    assert checked


def test_hybrid_is_the_default_mode_of_an_index_with_text(index) -> None:  # type: ignore[no-untyped-def]
    hybrid = index.search("the river and the old bridge", k=3)[0]
    assert all(hit.dense is not None and hit.lexical is not None for hit in hybrid)


def test_a_stop_word_query_is_refused_lexically_and_searched_densely_in_hybrid(index) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SettingError, match="holds no word the documents hold"):
        index.search("the and of it", mode="lexical")
    hybrid = index.search("the and of it", k=3, mode="hybrid")[0]
    dense = index.search("the and of it", k=3, mode="dense")[0]
    assert [h.id for h in hybrid] == [h.id for h in dense]


def test_unknown_mode_and_negative_passages_are_refused(index) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SettingError, match="use dense, lexical or hybrid"):
        index.search("river", mode="sparse")
    with pytest.raises(SettingError, match="passages"):
        index.search("river", passages=-1)


def test_an_index_without_text_searches_dense_and_says_so(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw

    moved = tmp_path / "emb"
    import shutil

    shutil.copytree(encoded, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["settings"]["data"] = str(tmp_path / "gone.jsonl")
    (moved / "manifest.json").write_text(json.dumps(manifest))
    notes: list[str] = []
    index = lw.LongIndex.build(moved, tmp_path / "idx", quantize="none", engine="faiss", on_note=notes.append)
    assert index.lexical is None and len(notes) == 1 and "built without text" in notes[0]
    assert index.search("river", k=2)[0][0].lexical is None  # dense by default
    with pytest.raises(SettingError, match="built without its documents' text"):
        index.search("river", mode="hybrid")


def test_text_that_is_not_the_encoded_corpus_is_refused_before_the_model_loads(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lengthwise as lw

    def no_model(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded before the text was checked")

    rows = _rows()
    changed, missing = tmp_path / "changed.jsonl", tmp_path / "missing.jsonl"
    changed.write_text("".join(json.dumps({**r, "text": r["text"] + " x" * (r["_id"] == "doc3")}) + "\n" for r in rows))
    missing.write_text("".join(json.dumps(r) + "\n" for r in rows[1:]))
    for corpus in (changed, missing, tmp_path / "nowhere.jsonl"):
        with pytest.raises(LongDocError, match=str(corpus.name)):
            lw.LongIndex.build(encoded, tmp_path / "idx", text=corpus, load_model=no_model)
        assert not (tmp_path / "idx").exists()


def test_a_failed_lexical_build_leaves_no_half_index(index, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from lengthwise.search.lexical import bm25 as lexical
    from lengthwise.search.lexical import shards as _bm25_build

    texts = [index.lexical.text(n) for n in range(24)]
    spans = [
        np.asarray(index.lexical.window.spans[a:b]) for a, b in itertools.pairwise(index.lexical.window.window_offsets)
    ]
    out = Path(index.folder) / "lexical-copy"
    lexical.LexicalIndex.build(texts, spans, out, granularity="document")

    def killed(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(_bm25_build, "_write_bm25", killed)
    with pytest.raises(KeyboardInterrupt):
        lexical.LexicalIndex.build(texts, spans, out, granularity="window")
    assert lexical.LexicalIndex.open(out).settings["granularity"] == "document"  # the earlier build still whole
    assert not (out.parent / ".lexical-copy-building" / "lexical.json").exists()  # the staging is never served
    monkeypatch.undo()
    lexical.LexicalIndex.build(texts, spans, out, granularity="window")  # resumes from the staging folder
    assert lexical.LexicalIndex.open(out).granularity.value == "window"
    assert not any(p.name.startswith(".lexical-copy") for p in out.parent.iterdir())


def test_window_granularity_scores_a_document_by_its_best_window(index, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from lengthwise.search.lexical.bm25 import LexicalIndex

    texts = [index.lexical.text(n) for n in range(24)]
    offsets = index.lexical.window.window_offsets
    spans = [np.asarray(index.lexical.window.spans[a:b]) for a, b in itertools.pairwise(offsets)]
    windows = LexicalIndex.build(texts, spans, tmp_path / "lex", granularity="window")
    scores = windows.scores(f"{RARE} mill")
    assert int(scores.argmax()) == index.doc_ids.index("doc7")
    units = np.asarray(windows.retriever.get_scores(windows.query_tokens(f"{RARE} mill")))
    assert len(units) == len(index.vectors)
    np.testing.assert_allclose(scores, [units[a:b].max() for a, b in itertools.pairwise(offsets)])


@pytest.mark.parametrize("share", [0, 10**9])  # every query through the postings path, then none
def test_window_scores_from_postings_alone_equal_every_windows_scores_to_the_bit(
    index,  # type: ignore[no-untyped-def]
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    share: int,
) -> None:
    from lengthwise.search.lexical import bm25 as lexical

    texts = [index.lexical.text(n) for n in range(24)]
    offsets = index.lexical.window.window_offsets
    spans = [np.asarray(index.lexical.window.spans[a:b]) for a, b in itertools.pairwise(offsets)]
    windows = lexical.LexicalIndex.build(texts, spans, tmp_path / "lex", granularity="window")
    words = sorted({w for text in texts for w in text.lower().split() if w.isalpha()})
    rng = np.random.default_rng(0)
    queries = [" ".join(rng.choice(words, size)) for size in (1, 2, 3, 5, 8) for _ in range(8)]
    queries += [f"{RARE} {RARE} mill", "the river the river river"]  # repeated terms count as bm25s counts them
    monkeypatch.setattr(lexical, "POSTINGS_PATH_SHARE", share)
    for query in queries:
        terms = windows.query_tokens(query)
        units = np.zeros(len(windows.spans), dtype=np.float32)
        if terms:
            units = np.asarray(windows.retriever.get_scores(terms), dtype=np.float32)
        expected = np.asarray([units[a:b].max() for a, b in itertools.pairwise(offsets)], dtype=np.float32)
        np.testing.assert_array_equal(windows.scores(query), expected, err_msg=query)


def test_cli_search_prints_the_same_hits_as_python(index) -> None:  # type: ignore[no-untyped-def]
    folder = str(index.folder)
    run = runner.invoke(app, ["search", folder, "-q", f"{RARE} mill", "--top-k", "3", "--mode", "hybrid", "--json",
                              "--passages", "2"])  # fmt: skip
    assert run.exit_code == 0, run.output
    printed = json.loads(run.stdout.strip().splitlines()[-1])
    python = index.search(f"{RARE} mill", k=3, mode="hybrid", passages=2)[0]
    assert printed == {"query_id": "q", "hits": [hit.to_dict() for hit in python]}
    assert printed["hits"][0]["passages"][0]["text"]
    text = runner.invoke(app, ["search", folder, "-q", f"{RARE} mill", "--top-k", "2", "--mode", "lexical"])
    assert text.exit_code == 0 and "doc7" in text.stdout  # the hits on stdout, not stderr
    bad = runner.invoke(app, ["search", folder, "-q", "river", "--mode", "sparse"])
    assert bad.exit_code != 0 and "--mode" in bad.output and "use dense, lexical or hybrid" in bad.output


def test_tune_records_the_best_arm_and_search_uses_it(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw
    from lengthwise.pipelines import tune_hybrid

    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    beir, queries = _beir(tmp_path, "dev")
    result = tune_hybrid(index, beir, split="dev", weights=(0.3, 0.7))
    assert set(result["scores"]) == {"dense", "lexical", "rrf", "convex-0.3", "convex-0.7", "zscore-0.3", "zscore-0.7"}
    best = max(result["scores"].values())
    assert result["scores"][result["mode"] if result["mode"] != "hybrid" else _arm(result["fusion"])] == best
    reopened = lw.LongIndex.open(tmp_path / "idx")
    assert reopened.lexical.settings["mode"] == result["mode"]
    assert reopened.fusion.to_dict() == result["fusion"]
    hits = reopened.search(queries[0]["text"], k=3)[0]
    assert (hits[0].dense is None) == (result["mode"] == "lexical")


def _arm(fusion: dict) -> str:
    return "rrf" if fusion["fusion"] == "rrf" else f"{fusion['fusion']}-{fusion['weight']:g}"


def _beir(tmp_path: Path, split: str) -> tuple[Path, list[dict[str, str]]]:
    """The fixture's corpus as a BEIR folder: query i (words 3 to 9 of document i) asks for document i."""
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    rows = _rows()
    (beir / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": f"q{i}", "text": " ".join(r["text"].split()[3:9])} for i, r in enumerate(rows)]
    (beir / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (beir / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"q{i}\tdoc{i}\t1\n" for i in range(len(rows))))  # fmt: skip
    return beir, queries


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_eval_through_the_index_takes_the_mode(index, tmp_path: Path, mode: str) -> None:  # type: ignore[no-untyped-def]
    from lengthwise.evaluation.config import EvalConfig
    from lengthwise.pipelines import evaluate_through_index

    beir, _ = _beir(tmp_path, "test")
    record = evaluate_through_index(EvalConfig(task="retrieval", data=beir, split="test"), index, mode=mode)
    assert record["index"]["mode"] == mode and ("fusion" in record["index"]) == (mode == "hybrid")
    assert record["index"]["overlap"] == 1.0  # 24 documents: the candidates hold them all
    assert record["scores"] == record["exact_scores"]
    dense = evaluate_through_index(EvalConfig(task="retrieval", data=beir, split="test"), index, mode="dense")
    assert record["scores"]["ndcg@10"] != dense["scores"]["ndcg@10"]
    run = runner.invoke(app, ["eval", "-t", "retrieval", "-d", str(beir), "--split", "test", "--index",
                              str(index.folder), "--mode", mode, "-o", str(tmp_path / "ev")])  # fmt: skip
    assert run.exit_code == 0, run.output
    saved = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert saved["scores"] == record["scores"] and saved["index"]["mode"] == mode


def test_search_depth_reaches_the_hybrid_proposals_from_python_and_the_cli(
    index, hybrid_settings: list[FusionSettings]
) -> None:  # type: ignore[no-untyped-def]
    """`LongIndex.search(depth=…)` and `search --depth` set how many documents each side proposes (the knob the
    10M-window run measures: deeper finds more of the exact fused top 10 among near-duplicates); the index's recorded
    fusion is kept otherwise, and a depth below 1 is refused naming it."""
    seen = hybrid_settings
    deep = index.search("the river and the old bridge", k=3, mode="hybrid", depth=24)
    index.search("the river and the old bridge", k=3, mode="hybrid")
    run = runner.invoke(app, ["search", str(index.folder), "-q", "river", "--mode", "hybrid", "--depth", "7"])
    assert run.exit_code == 0, run.output
    assert [s.depth for s in seen] == [24, index.fusion.depth, 7]
    assert {(s.fusion, s.weight) for s in seen} == {(index.fusion.fusion, index.fusion.weight)}
    assert [hit.id for hit in deep[0]] == [hit.id for hit in index.search("the river and the old bridge", k=3)[0]]
    with pytest.raises(SettingError, match="depth"):
        index.search("river", depth=0)
