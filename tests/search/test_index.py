"""Document search over encoded windows (`lengthwise.search.index`, `lengthwise.LongIndex`, `lengthwise index
build` / `lengthwise search`): the index ranks as the exact scan does, refuses what it cannot use in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from lengthwise.cli import app
from lengthwise.core.errors import SettingError
from lengthwise.facade import LongIndex
from lengthwise.longdoc.config import LongDocError
from lengthwise.search.local.files import served_files

HAYSTACK = Path(__file__).parents[1] / "longdoc" / "haystack.txt"
runner = CliRunner()


@pytest.fixture(scope="module")
def encoded(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 different documents of 3 to 9 sentences, encoded multi-vector in 24-token windows by the tiny BERT (two
    equal documents would tie, and a tie's order is not a ranking either search can be held to)."""
    folder = tmp_path_factory.mktemp("encoded")
    lines = [line for line in HAYSTACK.read_text().splitlines() if line.strip()]
    rows = [{"_id": f"doc{i}", "text": " ".join(lines[(i * 3 + j) % len(lines)] for j in range(3 + i % 7))}
            for i in range(30)]  # fmt: skip
    assert len({row["text"] for row in rows}) == len(rows)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ["encode", "-d", folder / "corpus.jsonl", "-o", folder / "emb", "-m", tiny_model_dir]
    run = runner.invoke(
        app, [str(a) for a in [*args, "--long", "multi-vector", "--window", "24", "--best-windows", "2"]]
    )
    assert run.exit_code == 0, run.output
    return folder / "emb"


QUERIES = ["the river and the old bridge", "a keyboard with a broken key", "taxes are due in spring"]


@pytest.mark.parametrize(
    ("engine", "quantize"), [("faiss", "none"), ("faiss", "int8"), ("usearch", "int8"), ("usearch", "none")]
)
def test_the_index_ranks_as_the_exact_scan(encoded: Path, tmp_path: Path, engine: str, quantize: str) -> None:
    import lengthwise as lw

    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize=quantize, engine=engine)
    windows = index.settings["windows"]
    found = [[(hit.id, hit.score) for hit in row]
             for row in index.search(QUERIES, k=5, mode="dense", candidates=windows, probes=10_000)]  # fmt: skip
    exact = index.exact_vectors(index.embed_queries(QUERIES), k=5, scoring=2)
    assert [[doc for doc, _ in row] for row in found] == [[doc for doc, _ in row] for row in exact]
    np.testing.assert_allclose(
        [[s for _, s in row] for row in found], [[s for _, s in row] for row in exact], atol=1e-5
    )


def test_ubinary_candidates_rescored_exactly(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw

    for engine in ("usearch", "faiss"):
        index = lw.LongIndex.build(encoded, tmp_path / engine, quantize="ubinary", engine=engine)
        hits = index.search(QUERIES[0], k=3, mode="dense", candidates=50)
        exact = dict(index.exact_vectors(index.embed_queries(QUERIES[:1]), k=30, scoring=2)[0])
        for hit in hits[0]:
            assert hit.score == pytest.approx(exact[hit.id], abs=1e-5)  # a found document gets its exact score


def test_sign_bit_indexes_take_four_times_the_candidate_windows(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # at 1,000 candidate windows, sign bits found 0.94-0.95 of SciFact's exact top 100 (bench_index.py oversample)
    import lengthwise as lw
    from lengthwise.search.local.windows import LocalWindows

    asked: list[int] = []
    original = LocalWindows._candidate_vectors

    def spy(self: LocalWindows, queries: np.ndarray, candidates: int, probes: int) -> list[np.ndarray]:
        asked.append(candidates)
        return original(self, queries, candidates, probes)

    monkeypatch.setattr(LocalWindows, "_candidate_vectors", spy)
    for quantize in ("int8", "ubinary"):
        index = lw.LongIndex.build(encoded, tmp_path / quantize, quantize=quantize, engine="faiss")
        assert index.search(QUERIES[0], k=3)[0]
        index.search(QUERIES[0], k=3, candidates=50)  # asked for: kept
    assert asked == [1000, 50, 4000, 50]


def test_only_the_best_candidates_are_scored_on_all_their_windows(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 1M windows, 4,000 candidate windows made a ubinary query 7x slower: every window of every candidate
    document was read. Now the candidates are ranked on their candidate windows first, and only the best
    `RESCORED` per document asked for are read whole (here 1 per document: 3)."""
    import lengthwise as lw
    from lengthwise.search import types
    from lengthwise.search.local.windows import LocalWindows

    monkeypatch.setattr(types, "RESCORED", 1)
    monkeypatch.setattr(types, "RESCORED_AT_LEAST", 0)
    index = lw.LongIndex.build(encoded, tmp_path / "idx", quantize="none", engine="faiss")
    read: list[int] = []
    original, provisional = LocalWindows.document_scores, LocalWindows._provisional

    def spy(self: LocalWindows, query: object, docs: np.ndarray, *rest: object) -> object:
        read.append(int((self.offsets[docs + 1] - self.offsets[docs]).sum()))  # every window of each document
        return original(self, query, docs, *rest)  # type: ignore[arg-type]

    def spy_provisional(self: LocalWindows, query: object, keys: np.ndarray, *rest: object) -> object:
        read.append(len(self._expanded(keys)[0]))  # the candidate windows, read once per distinct vector
        return provisional(self, query, keys, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(LocalWindows, "document_scores", spy)
    monkeypatch.setattr(LocalWindows, "_provisional", spy_provisional)
    windows = index.settings["windows"]
    found = [(hit.id, hit.score) for hit in index.search(QUERIES[0], k=3, mode="dense", candidates=windows,
                                                          probes=10_000)[0]]  # every window a candidate  # fmt: skip
    exact = index.exact_vectors(index.embed_queries(QUERIES[:1]), k=3, scoring=2)[0]
    assert [doc for doc, _ in found] == [doc for doc, _ in exact]
    assert [score for _, score in found] == pytest.approx([score for _, score in exact], abs=1e-5)
    position = {doc: i for i, doc in enumerate(index.doc_ids)}
    whole = sum(int(np.diff(index.offsets)[position[doc]]) for doc, _ in found)
    assert read == [windows, whole] and whole < windows


def test_a_single_query_through_usearch(encoded: Path, tmp_path: Path) -> None:
    # usearch answers one query with Matches, not BatchMatches (the benchmark found this)
    import lengthwise as lw

    index = lw.LongIndex.build(encoded, tmp_path / "idx", engine="usearch")
    found = index.windows.engine.search(np.asarray(index.embed_queries(QUERIES[:1]), dtype=np.float32), 5)
    assert found.shape == (1, 5) and (found >= 0).all()


def test_cli_build_and_search_json(encoded: Path, tmp_path: Path) -> None:
    run = runner.invoke(app, ["index", "build", str(encoded), "--out", str(tmp_path / "idx")])
    assert run.exit_code == 0, run.output
    assert "indexed" in run.output and "(usearch, int8)" in run.output
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(QUERIES)))
    run = runner.invoke(app, ["search", str(tmp_path / "idx"), "--queries", str(queries), "--top-k", "4", "--json"])
    assert run.exit_code == 0, run.output
    lines = [json.loads(line) for line in run.output.splitlines()]
    assert [line["query_id"] for line in lines] == ["q0", "q1", "q2"]
    for line in lines:
        scores = [hit["score"] for hit in line["hits"]]
        assert len(scores) == 4 and scores == sorted(scores, reverse=True)


def test_refusals_are_one_line(encoded: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    import lengthwise as lw
    from lengthwise.core.models import load_plain_model

    with pytest.raises(LongDocError, match=r"no manifest\.json"):
        LongIndex.build_windows(tmp_path, tmp_path / "idx")
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "notes.txt").write_text("mine")
    with pytest.raises(SettingError, match="exists and is not an index"):
        LongIndex.build_windows(encoded, tmp_path / "taken")
    with pytest.raises(LongDocError, match=r"no index\.json"):
        LongIndex.open(tmp_path)
    index = lw.LongIndex.build(encoded, tmp_path / "idx")
    other = load_plain_model(tiny_model_dir, device="cpu")
    with torch_no_grad():
        next(other.parameters()).add_(0.01)  # another model
    with pytest.raises(SettingError, match="the index was built with weights"):
        lw.LongIndex.open(index.folder, model=other)
    (served_files(tmp_path / "idx") / "vectors.npy").write_bytes(b"broken")
    with pytest.raises(LongDocError, match="unreadable index"):
        LongIndex.open(tmp_path / "idx")
    run = runner.invoke(app, ["search", str(tmp_path), "--query", "x"])
    assert run.exit_code == 2 and run.output.startswith("error:") and len(run.output.strip().splitlines()) == 1


def torch_no_grad():
    import torch

    return torch.no_grad()


def _beir(encoded: Path, folder: Path, drop: int = 0) -> Path:
    """The fixture's corpus as a BEIR folder (less its last `drop` documents), with three judged queries."""
    rows = [json.loads(line) for line in (encoded.parent / "corpus.jsonl").read_text().splitlines()]
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows[: len(rows) - drop]))
    queries = [{"_id": f"q{i}", "text": text} for i, text in enumerate(QUERIES)]
    (folder / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in queries))
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq0\tdoc3\t1\nq1\tdoc11\t1\nq2\tdoc20\t1\n")
    return folder


def test_eval_through_the_index_scores_as_the_exact_evaluation(
    encoded: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig

    beir = _beir(encoded, tmp_path / "beir")
    # FAISS IVF over fp32 with every list probed (this small index has fewer lists than the default 32 probes):
    # exact candidates, so the index must rank as the exact scan does (HNSW may miss a window, and did in CI)
    assert runner.invoke(app, ["index", "build", str(encoded), "--out", str(tmp_path / "idx"), "--quantize",
                               "none", "--engine", "faiss"]).exit_code == 0  # fmt: skip
    run = runner.invoke(app, ["eval", "-t", "retrieval", "-d", str(beir), "--index", str(tmp_path / "idx"),
                              "--mode", "dense", "--top-k", "100", "-o", str(tmp_path / "out")])  # fmt: skip
    assert run.exit_code == 0, run.output
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["index"]["overlap"] == 1.0
    assert record["scores"] == record["exact_scores"]
    config = EvalConfig(task="retrieval", data=str(beir), retrieval=RetrievalConfig(top_k=100))
    long = lw.LongDocConfig(strategy="multi-vector", window=24, best_windows=2)
    exact = lw.evaluate(config, tiny_model_dir, long=long)  # the ordinary exact evaluation, corpus encoded anew
    for name, value in exact["scores"].items():
        assert record["exact_scores"][name] == pytest.approx(value, abs=1e-3), name


def test_eval_through_an_index_of_another_corpus_is_refused(encoded: Path, tmp_path: Path) -> None:
    beir = _beir(encoded, tmp_path / "beir", drop=2)
    assert runner.invoke(app, ["index", "build", str(encoded), "--out", str(tmp_path / "idx")]).exit_code == 0
    run = runner.invoke(app, ["eval", "-t", "retrieval", "-d", str(beir), "--index", str(tmp_path / "idx"),
                              "-o", str(tmp_path / "out")])  # fmt: skip
    assert run.exit_code == 2 and "build the index from this corpus" in run.output, run.output
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_build_streams_the_shards_instead_of_loading_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Peak numpy memory during a build stays near one chunk, not the corpus: 8 shards of 2,500 windows × 64 (5 MB
    of fp32 in all) indexed 1,000 windows at a time, IVF lists trained on 1,000 of them, stay under 2 MB; the index
    holds the same unit vectors."""
    import tracemalloc

    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import EmbeddingStore
    from lengthwise.search.local import files as index_files

    rng = np.random.default_rng(0)
    store = EmbeddingStore(tmp_path / "enc", {"model": "random", "long": {"strategy": "multi-vector"}})
    shards = []
    for k in range(8):
        vectors = rng.normal(size=(2_500, 64)).astype(np.float32) * rng.uniform(0.5, 2.0)
        shards.append(vectors)
        store.write("w0-", [f"s{k}d{i}" for i in range(250)], MultiVectors(vectors, np.arange(0, 2_501, 10)))
    monkeypatch.setattr(index_files, "CHUNK", 1_000)
    monkeypatch.setattr(index_files, "TRAIN_SAMPLE", 1_000)  # bounded anyway (150 MB at 384 dimensions)
    __import__("faiss")  # imported before: the module's own 4 MB are not the build's (the test failed run alone)
    tracemalloc.start()
    built = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="int8", engine="faiss")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000, peak  # loading the shards whole took > 10 MB (concatenated, then normalised)
    expected = np.concatenate(shards)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(np.asarray(built.vectors), expected, rtol=1e-6, atol=1e-7)
    assert built.doc_ids[:2] == ["s0d0", "s0d1"] and len(built.doc_ids) == 2_000 and built.offsets[-1] == 20_000


def test_a_disk_without_room_is_refused_before_the_build_and_leaves_nothing(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seen at 10M windows: the disk filled while the fp32 copy was written through a memory map, and the build
    died of SIGBUS, leaving a 15 GB staging folder. Now the space is checked first, and the copy's blocks are
    allocated before any page is written, so a disk that fills meanwhile raises an error and cleans up."""
    import errno
    import os
    import shutil
    from collections import namedtuple

    usage, real = namedtuple("usage", "total used free"), shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage(10**9, 10**9 - 1_000, 1_000))
    with pytest.raises(SettingError, match=r"needs about .* of disk for .* windows and .* is free"):
        LongIndex.build_windows(encoded, tmp_path / "idx", engine="faiss")
    assert list(tmp_path.iterdir()) == []  # no index, no staging folder
    monkeypatch.setattr(shutil, "disk_usage", real)

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.raises(LongDocError, match=r"no room for the index.s vectors \(No space left on device\)"):
        LongIndex.build_windows(encoded, tmp_path / "idx", engine="faiss")
    assert list(tmp_path.iterdir()) == []


def _save_every_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 20 windows, the engine saved after each one."""
    from lengthwise.search.local import files as index_files

    monkeypatch.setattr(index_files, "CHUNK", 20)
    monkeypatch.setattr(index_files, "CHECKPOINT_SECONDS", 0.0)


def _interrupted(encoded: Path, out: Path, engine: str, quantize: str, at: int) -> None:
    """A build of `out` stopped by Ctrl-C once `at` windows are in the engine."""

    def stop(done: int, _: int) -> None:
        if done >= at:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LongIndex.build_windows(encoded, out, quantize=quantize, engine=engine, on_progress=stop)


@pytest.mark.parametrize("engine", ["faiss", "usearch"])
def test_an_interrupted_build_resumes_from_its_last_engine_save(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """A 42-minute build at 10M windows started again from nothing when stopped. Now the staging folder stays, and
    the same build run again keeps its vectors and its engine's last save (here: every chunk of 20 windows)."""
    from lengthwise.search.local import files as index_files

    _save_every_chunk(monkeypatch)
    fresh = LongIndex.build_windows(encoded, tmp_path / "fresh", quantize="int8", engine=engine)
    _interrupted(encoded, tmp_path / "idx", engine, "int8", at=60)  # stopped before the save at 60: 40 are saved
    staging = tmp_path / ".idx-building"
    assert (staging / "build.json").is_file() and not (tmp_path / "idx").exists()

    def copy_again(*_: object) -> None:
        raise AssertionError("the vectors were copied again")

    monkeypatch.setattr(index_files, "unit_vectors", copy_again)
    reported: list[int] = []
    built = LongIndex.build_windows(encoded, tmp_path / "idx", quantize="int8", engine=engine,
                              on_progress=lambda done, _: reported.append(done))  # fmt: skip
    windows = built.settings["distinct"]  # the engine holds each distinct window vector once
    assert reported[0] == 60 and reported[-1] == windows  # from the save at 40 on, not from 0
    assert built.windows.engine.count() == windows  # nothing added twice
    assert not staging.exists() and not (tmp_path / "idx" / "build.json").exists()
    if engine == "faiss":  # deterministic: the resumed index is byte for byte a fresh build's
        import faiss

        built_bytes, fresh_bytes = (faiss.serialize_index(i.windows.engine.index) for i in (built, fresh))
        assert (built_bytes == fresh_bytes).all()
    vectors = np.array(built.vectors[:5])
    exact = built.exact_vectors(vectors, k=5)
    found = built.search_vectors(vectors, k=5, candidates=windows, probes=10_000)
    assert [[doc for doc, _ in row] for row in found] == [[doc for doc, _ in row] for row in exact]


def test_another_build_starts_afresh_over_an_interrupted_one(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lengthwise.search.local import files as index_files

    _save_every_chunk(monkeypatch)
    _interrupted(encoded, tmp_path / "idx", "faiss", "int8", at=60)
    copies: list[Path] = []
    copy = index_files.unit_vectors
    monkeypatch.setattr(
        index_files, "unit_vectors", lambda files, path, *rest: copies.append(path) or copy(files, path, *rest)
    )
    built = LongIndex.build_windows(encoded, tmp_path / "idx", quantize="ubinary", engine="faiss")
    assert len(copies) == 1 and built.settings["quantize"] == "ubinary"
    assert built.windows.engine.count() == built.settings["distinct"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_the_cli_says_an_interrupted_build_resumes(
    encoded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lengthwise.search.local import build as _build

    _save_every_chunk(monkeypatch)
    real = _build.stage_windows

    def stopped(*args: object, **kwargs: object) -> object:
        def stop(done: int, _: int) -> None:
            if done >= 40:
                raise KeyboardInterrupt

        return real(*args, **{**kwargs, "on_progress": stop})  # type: ignore[arg-type]

    monkeypatch.setattr(_build, "stage_windows", stopped)
    run = runner.invoke(app, ["index", "build", str(encoded), "--out", str(tmp_path / "idx"), "--engine", "faiss"])
    assert run.exit_code == 130, run.output
    assert "run the same command again to resume" in run.output
    monkeypatch.setattr(_build, "stage_windows", real)
    run = runner.invoke(app, ["index", "build", str(encoded), "--out", str(tmp_path / "idx"), "--engine", "faiss"])
    assert run.exit_code == 0, run.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_cli_search_takes_the_candidate_windows_and_probes(encoded: Path, tmp_path: Path) -> None:
    import lengthwise as lw

    index = lw.LongIndex.build(encoded, tmp_path / "idx", engine="faiss")
    windows = str(index.settings["windows"])
    args = ["search", str(tmp_path / "idx"), "--query", QUERIES[0], "--top-k", "3", "--json", "--mode", "dense"]
    run = runner.invoke(app, [*args, "--candidates", windows, "--probes", "10000"])  # every window a candidate
    assert run.exit_code == 0, run.output
    exact = index.exact_vectors(index.embed_queries(QUERIES[:1]), k=3, scoring=2)[0]
    assert [hit["id"] for hit in json.loads(run.output)["hits"]] == [doc for doc, _ in exact]
    run = runner.invoke(app, [*args, "--candidates", "1", "--probes", "1"])  # one candidate vector: its documents
    assert run.exit_code == 0, run.output
    holding = index.windows.candidate_documents(index.embed_queries(QUERIES[:1]), 1, 1)[0]
    assert len(json.loads(run.output)["hits"]) == min(3, len(holding))
    with pytest.raises(SettingError, match="candidates=0: must be ≥ 1"):
        index.search(QUERIES[0], candidates=0)


def _duplicated(folder: Path, docs: int = 200, per_doc: int = 20, fillers: int = 3) -> np.ndarray:
    """A shard folder like the LongEmbed passkey protocol's: every document is the same few filler windows over and
    over, and one window of its own (its needle) somewhere among them. Returns the needles (docs, 64)."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import EmbeddingStore

    rng = np.random.default_rng(0)
    filler = rng.normal(size=(fillers, 64)).astype(np.float32)
    needles = rng.normal(size=(docs, 64)).astype(np.float32)
    rows = np.tile(filler, (docs * per_doc // fillers + 1, 1))[: docs * per_doc].reshape(docs, per_doc, 64)
    rows[np.arange(docs), rng.integers(per_doc, size=docs)] = needles
    store = EmbeddingStore(folder, {"model": "random", "long": {"strategy": "multi-vector"}})
    ids, offsets = [f"d{i}" for i in range(docs)], np.arange(docs + 1) * per_doc
    store.write("w0-", ids, MultiVectors(rows.reshape(-1, 64), offsets))
    return needles


@pytest.mark.parametrize("engine", ["usearch", "faiss"])
def test_identical_windows_are_indexed_once_and_every_document_stays_reachable(tmp_path: Path, engine: str) -> None:
    """Issue 33.0: a passkey corpus (filler repeated around one needle per document) gave Acc@1 50.4 through the
    default USearch int8 index against 84.4 exact: HNSW over thousands of exact duplicates fell into islands (here:
    0.56 of 200 queries found their document). Each distinct vector is now indexed once, standing for every window
    that holds it, so the index ranks as the exact scan does."""
    needles = _duplicated(tmp_path / "enc")
    index = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", engine=engine)
    assert index.settings["windows"] == 4_000 and index.settings["distinct"] == 203
    assert index.windows.engine.count() == 203
    queries = needles + 0.3 * np.random.default_rng(1).normal(size=needles.shape).astype(np.float32)
    exact = index.exact_vectors(queries, k=3)
    assert [row[0][0] for row in exact] == [f"d{i}" for i in range(200)]
    found = index.search_vectors(queries, k=3)  # the default 1,000 candidates: more than the distinct vectors
    assert [row[0][0] for row in found] == [f"d{i}" for i in range(200)]
    # below the needle, documents tie on a shared filler vector: the scores must be the exact scan's, the order
    # among equal scores is free
    np.testing.assert_allclose([[s for _, s in row] for row in found], [[s for _, s in row] for row in exact],
                               atol=1e-5)  # fmt: skip
    few = index.search_vectors(queries, k=1, candidates=20)  # 20 approximate candidates (HNSW / IVF may miss one)
    assert np.mean([row[0][0] == f"d{i}" for i, row in enumerate(few)]) >= 0.97  # was 0.56 before
    filler = np.array(index.vectors[1])  # the first document's second window: filler, in every document
    every = index.search_vectors(filler[None], k=200, candidates=1)[0]
    assert sorted(doc for doc, _ in every) == sorted(f"d{i}" for i in range(200))  # one candidate vector: all 200
    assert index.windows.candidate_documents(filler[None], 1, 64)[0].tolist() == list(range(200))


def test_a_query_expands_its_candidate_vectors_up_to_a_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lengthwise.search.local import windows as index_module

    _duplicated(tmp_path / "enc", docs=30, per_doc=10, fillers=2)
    index = LongIndex.build_windows(tmp_path / "enc", tmp_path / "idx", quantize="none")
    sizes = np.diff(np.asarray(index.windows.starts))
    keys = np.argsort(-sizes, kind="stable")[:3]  # the two fillers (about 135 windows each), then a needle
    assert len(index.windows._expanded(keys)[0]) == sizes[keys].sum()
    monkeypatch.setattr(index_module, "EXPANDED_AT_MOST", int(sizes[keys[0]]) + 1)
    rows, row_keys = index.windows._expanded(keys)
    assert set(row_keys.tolist()) == {keys[0]} and len(rows) == sizes[keys[0]]  # the nearest whole, no more
    monkeypatch.setattr(index_module, "EXPANDED_AT_MOST", 1)
    assert len(index.windows._expanded(keys)[0]) == sizes[keys[0]]  # the nearest is always taken whole


def test_an_exact_scan_of_every_document_reads_the_map_without_copying_it(encoded: Path, tmp_path: Path) -> None:
    """`document_scores` of every document (the hybrid exact scan of `eval --index` and the benchmarks) scores the
    memory-mapped vectors in place: it gathered a copy of every window first (15 GB at 10M windows, per query).
    The scores are those of the gathered path, document by document."""
    import tracemalloc

    import torch

    import lengthwise as lw

    index = lw.LongIndex.build(encoded, tmp_path / "idx")
    query = torch.nn.functional.normalize(torch.as_tensor(index.embed_queries(QUERIES[:1])[0]), dim=-1)
    everything = np.arange(len(index.doc_ids))
    tracemalloc.start()
    scores = index.windows.document_scores(query, everything, 2)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < np.asarray(index.vectors).nbytes / 2  # numpy's allocations are traced; a gathered copy is whole
    one_by_one = [index.windows.document_scores(query, np.asarray([d]), 2)[0] for d in everything]
    np.testing.assert_allclose(scores, one_by_one, atol=1e-6)
