"""The scale index of benchmarks/search/hybrid/ (scale.py) records the model of the windows it copies, so it can be
searched with text and served (issue 36's 1M-window benchmark): a fresh build records it, and `scale-model` upgrades
an index built before it did, in place, to the same record.

Tiny: two corpora of a few documents encoded with the random 2-layer BERT stand for the quality stage's qmsum and
SciFact folders; the scale index has 200 windows.
"""

from __future__ import annotations

import importlib
import json
import random
from pathlib import Path

import pytest

WINDOWS = 200  # 10 documents of 20 windows
WORDS = ("river", "mill", "valley", "winter", "school", "museum", "market", "honey", "church", "bridge")


@pytest.fixture(scope="module")
def bench():
    return importlib.import_module("benchmarks.search.hybrid")  # run from the repository root


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, one_thread) -> Path:
    """A work folder holding the quality stage's two encoded folders (the tiny model, 24-token windows)."""
    import lengthwise as lw
    from lengthwise.longdoc import LongDocConfig

    folder = tmp_path_factory.mktemp("bench-hybrid-work")
    rng = random.Random(0)
    for name in ("qmsum", "scifact"):
        rows = [{"_id": f"{name}{i}", "text": " ".join(rng.choices(WORDS, k=rng.randint(20, 60)))} for i in range(6)]
        corpus = folder / f"{name}.jsonl"
        corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        long = LongDocConfig(strategy="multi-vector", window=24, stride=12)
        lw.encode(corpus, folder / name / "encoded", model=str(tiny_model_dir), long=long)
    return folder


def _placeholder_index(bench, work: Path, windows: int = WINDOWS) -> Path:
    """A scale index as the scale stage built it before it recorded the model (the 1M index of 27 November)."""
    import numpy as np

    from lengthwise.core.encoder import MultiVectors
    from lengthwise.facade import LongIndex
    from lengthwise.longdoc.storage.store import EmbeddingStore

    source = bench._scale_source(work)
    shards, out = work / f"scale-{windows}" / "encoded", work / f"scale-{windows}" / "index"
    store = EmbeddingStore(shards, {"model": bench.SCALE_MODEL_UNKNOWN, "long": {"strategy": "multi-vector"}})
    rng = np.random.default_rng(0)
    docs = windows // bench.PER_DOC
    picked = source[rng.integers(0, len(source), size=windows)]
    vectors = picked + rng.normal(0, bench.NOISE, size=picked.shape)
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    ids = [f"s{i}" for i in range(docs)]
    store.write("w0-", ids, MultiVectors(vectors, np.arange(docs + 1, dtype=np.int64) * bench.PER_DOC))
    LongIndex.build_windows(shards, out)
    return out


def test_scale_model_upgrades_a_placeholder_index_in_place(bench, work: Path, tiny_model_dir: Path) -> None:
    import lengthwise as lw
    from lengthwise.core.errors import LengthwiseError
    from lengthwise.search.local.files import served_files

    folder = _placeholder_index(bench, work)
    before = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    vectors = (served_files(folder) / "vectors.npy").stat()
    with pytest.raises(LengthwiseError):  # the gap: the recorded "model" cannot be loaded to embed a text query
        lw.LongIndex.open(folder).search(["river bridge"], mode="dense")

    said = bench.record_scale_model(WINDOWS, work)
    assert "now records" in said
    after = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    assert {key: value for key, value in after.items() if key not in ("encode_settings", "model")} == {
        key: value for key, value in before.items() if key != "encode_settings"
    }  # counts, digests and engine as built
    encoded = json.loads((work / "qmsum" / "encoded" / "manifest.json").read_text(encoding="utf-8"))["settings"]
    made = after["encode_settings"]
    assert made["model"] == encoded["model"] == str(tiny_model_dir)
    assert made["long"] == encoded["long"] and made["long"]["window"] == 24
    assert made["copied"]["noise_sigma"] == bench.NOISE and "not encodings" in made["copied"]["vectors"]
    assert after["model"]["name"] == str(tiny_model_dir.resolve()) and len(after["model"]["weights_sha256_16"]) == 16
    manifest = json.loads((work / f"scale-{WINDOWS}" / "encoded" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["settings"] == made
    assert (served_files(folder) / "vectors.npy").stat().st_mtime_ns == vectors.st_mtime_ns  # nothing rebuilt

    hits = lw.LongIndex.open(folder).search(["river bridge", "honey market"], k=3, mode="dense")
    assert [len(row) for row in hits] == [3, 3]
    assert "already" in bench.record_scale_model(WINDOWS, work)  # run again: nothing to do

    # a fresh build records the same settings and model
    fresh_work = work / "fresh"
    fresh_work.mkdir()
    for name in ("qmsum", "scifact"):
        (fresh_work / name).symlink_to(work / name)
    fresh = json.loads((bench._scale_index(WINDOWS, fresh_work) / "index.json").read_text(encoding="utf-8"))
    own = ("encoded", "generation")  # the folder built from, and the build's own generation id
    assert {k: v for k, v in fresh.items() if k not in own} == {k: v for k, v in after.items() if k not in own}


def test_scale_model_refuses_an_index_it_did_not_write(bench, work: Path) -> None:
    folder = work / f"scale-{WINDOWS}" / "index"
    if not folder.is_dir():
        _placeholder_index(bench, work)
    settings = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    (folder / "index.json").write_text(json.dumps({**settings, "encode_settings": {"model": "someone/else"}}))
    with pytest.raises(SystemExit, match="not the scale corpus's placeholder"):
        bench.record_scale_model(WINDOWS, work)
    assert json.loads((folder / "index.json").read_text())["encode_settings"] == {"model": "someone/else"}


def test_a_killed_scale_build_keeps_its_whole_shards_and_its_staged_index(
    bench, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run again after a kill, the scale stage writes only the blocks it had not written (the same bytes: one seeded
    stream) and leaves the index's staging folder for `build_windows` to resume from (it once deleted both)."""
    import hashlib

    from lengthwise.facade import LongIndex

    windows = 250_000  # three blocks of window vectors: 100,000, 100,000 and 50,000
    root = work / "resume"
    root.mkdir()
    for name in ("qmsum", "scifact"):
        (root / name).symlink_to(work / name)
    staging = root / f"scale-{windows}" / ".index-building"
    staging.mkdir(parents=True)
    (staging / "engine.usearch").write_bytes(b"the last engine save")
    seen: list[list[str]] = []

    def killed(cls, shards: Path, out: Path, **_: object) -> None:
        seen.append(sorted(p.name for p in staging.iterdir()))
        raise KeyboardInterrupt

    monkeypatch.setattr(LongIndex, "build_windows", classmethod(killed))
    with pytest.raises(KeyboardInterrupt):
        bench._scale_index(windows, root)
    shards = root / f"scale-{windows}" / "encoded"
    vectors = sorted(shards.glob("w0-*[0-9].npy"))
    assert [p.name for p in vectors] == ["w0-00000.npy", "w0-00001.npy", "w0-00002.npy"]
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in vectors}
    kept = vectors[0].stat().st_mtime_ns
    for path in shards.glob("w0-00001*"):  # killed while writing the second block
        path.unlink()
    with pytest.raises(KeyboardInterrupt):
        bench._scale_index(windows, root)
    assert vectors[0].stat().st_mtime_ns == kept  # a whole shard is not written again
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(shards.glob("w0-*[0-9].npy"))} == digests
    assert seen == [["engine.usearch"], ["engine.usearch"]]  # the staged build is there for the index to resume


def test_the_batched_exact_scan_ranks_as_the_per_query_one(bench, work: Path) -> None:
    """The scale stage's recall reference at 10M windows (one pass over the vectors for every query, a block of
    documents at a time) gives the fused top 10 that `lengthwise.search.exact.exact_fused` gives query by query."""
    import numpy as np
    import torch

    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.exact import exact_ranked
    from lengthwise.search.searcher import Searcher

    folder = work / f"scale-{WINDOWS}" / "index"
    if not folder.is_dir():
        _placeholder_index(bench, work)
    if not bench._has_lexical(folder):
        bench._lexical_build(folder, WINDOWS // bench.PER_DOC)
    index = LongIndex.open(folder)
    searcher = Searcher(index.windows, index.lexical, index.queries, WindowScoring(), "no text")
    fusion = bench.scale_fusion()
    rng = np.random.default_rng(5)
    queries = np.asarray(index.vectors[rng.integers(0, WINDOWS, size=6)]) + rng.normal(0, 0.05, size=(6, 1))
    texts = [" ".join(bench._scale_texts(10)[d].split()[:5]) for d in range(6)]
    for block in (30, 45, 10_000):  # documents of 20 windows: one per block, two, all of them
        batched = bench._exact_fused_batched(searcher, fusion, queries.astype(np.float32), texts, 10, block=block)
        for n in range(6):
            unit = torch.nn.functional.normalize(torch.as_tensor(queries[n].astype(np.float32)), dim=-1)
            ranked = exact_ranked(searcher, unit.numpy(), texts[n], 10, Mode.HYBRID, fusion)
            assert [doc for doc, _ in batched[n]] == [doc for doc, _ in ranked]
            assert [score for _, score in batched[n]] == pytest.approx([score for _, score in ranked], abs=1e-6)


def test_the_document_granularity_side_is_built_beside_the_window_one(bench, work: Path) -> None:
    """`scale --granularity document` (the granularity the docs advise above a few million windows) builds whole-
    document BM25 in ``lexical-document`` beside the index's own window BM25, and records its figures under their own
    key, so neither run's figures or files replace the other's."""
    from lengthwise.search.lexical.bm25 import Granularity, LexicalIndex
    from lengthwise.search.local.files import served_files

    folder = work / f"scale-{WINDOWS}" / "index"
    if not folder.is_dir():
        _placeholder_index(bench, work)
    bench._lexical_build(folder, WINDOWS // bench.PER_DOC, "document")
    document = LexicalIndex.open(folder / "lexical-document")
    assert document.granularity is Granularity.DOCUMENT
    assert document.settings["documents"] == WINDOWS // bench.PER_DOC
    assert bench._lexical_folder(folder, "window") == served_files(folder) / "lexical"  # the generation's own
    assert (bench._scale_key(WINDOWS, "window"), bench._scale_key(WINDOWS, "document")) == (
        str(WINDOWS),
        f"{WINDOWS}-document-granularity",
    )


def test_the_depth_stage_finds_the_exact_top_10_once_the_proposals_hold_every_document(
    bench, work: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`scale-depth` (why the fused top 10 misses exact hits at 10M windows): when the proposals hold every one of the
    10 documents (any depth: at least 10·k are proposed) the index's top 10 is the exact scan's, with the same fused
    scores. The section is written to the results file it is given, never the repository's."""
    import argparse
    import json

    folder = work / f"scale-{WINDOWS}" / "index"
    if not folder.is_dir():
        _placeholder_index(bench, work)
    if not bench._has_lexical(folder):
        bench._lexical_build(folder, WINDOWS // bench.PER_DOC)
    results = tmp_path / "bench_hybrid.json"
    monkeypatch.setattr(bench._common, "RESULTS", results)  # patched where the stages read it (_common)
    args = argparse.Namespace(work=work, windows=WINDOWS, granularity="window", queries=8, recall_queries=8,
                              depths=[100])  # fmt: skip
    bench.stage_scale_depth(args)
    section = json.loads(results.read_text())["scale_depth"][str(WINDOWS)]
    whole = section["depths"]["100"]
    assert (whole["recall_at_10_vs_exact_fused"], whole["first_hit_agrees"]) == (1.0, 1.0)
    assert whole["fused_score_kept"] == pytest.approx(1.0, abs=1e-4)
    assert section["queries"] == 8 and whole["latency_clients_1"]["p50_ms"] > 0


def test_the_batched_exact_scan_fuses_each_querys_candidates_for_the_default_fusion(bench, work: Path) -> None:
    """For the library's default fusion over both BM25 granularities (`scale --granularity both --fusion default`),
    the batched exact scan is `lengthwise.search.exact.exact_ranked`'s: z-scores over the union of each side's exact
    best (`lengthwise.search.fusion.fuse_exact` with the lexical side's `side_scores`), not over the whole corpus as
    convex fuses. 100 documents and a depth of 20 (k = 2), so the candidates are a part of the corpus and the two
    differ."""
    from dataclasses import replace

    import numpy as np
    import torch

    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.exact import exact_ranked
    from lengthwise.search.fusion import fuse
    from lengthwise.search.lexical.bm25 import BothGranularities, open_lexical
    from lengthwise.search.searcher import Searcher

    windows_count = 2000  # 100 documents
    folder = _placeholder_index(bench, work, windows_count)
    docs = windows_count // bench.PER_DOC
    bench._lexical_build(folder, docs, "both")
    lexical = open_lexical(bench._lexical_folder(folder, "both"))
    assert isinstance(lexical, BothGranularities) and bench._lexical_complete(folder / "lexical-both", "both")
    index = LongIndex.open(folder)
    settings = replace(bench.scale_fusion("default"), depth=5)  # each side's exact 20 best (10 · k)
    searcher = Searcher(index.windows, lexical, index.queries, WindowScoring(), "no text")
    rng = np.random.default_rng(7)
    queries = np.asarray(index.vectors[rng.integers(0, windows_count, size=6)]) + rng.normal(0, 0.05, size=(6, 1))
    texts = [" ".join(bench._scale_texts(docs)[d].split()[3:8]) for d in range(6)]
    batched = bench._exact_fused_batched(searcher, settings, queries.astype(np.float32), texts, 2, block=700)
    whole_differs = []
    for n in range(6):
        unit = torch.nn.functional.normalize(torch.as_tensor(queries[n].astype(np.float32)), dim=-1)
        ranked = exact_ranked(searcher, unit.numpy(), texts[n], 2, Mode.HYBRID, settings)
        assert [doc for doc, _ in batched[n]] == [doc for doc, _ in ranked]
        # z-scores magnify the fp32 dense scores' rounding (one batch against one query): 1e-4, where the whole-
        # corpus scan is off by tenths
        assert [score for _, score in batched[n]] == pytest.approx([score for _, score in ranked], abs=1e-4)
        dense = searcher.dense_scores(unit, np.arange(docs))
        whole = fuse(dense, lexical.side_scores(texts[n]).astype(np.float64), settings)  # the convex path's scan
        whole_differs.append(not np.allclose(sorted(whole)[-2:][::-1], [score for _, score in ranked]))
    assert all(whole_differs)  # the whole-corpus scan would not have reproduced the search's fusion


def test_the_scale_stage_measures_the_default_fusion_over_both_granularities_beside_convex(
    bench, work: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`scale --granularity both --fusion default` (issue 49's latency goal: the default hybrid against dense) builds
    both BM25 sides beside the index's own, times dense and hybrid, and checks its top 10 against the exact scan of
    the same fusion, under a key of its own; the convex figures keep their key and fields. With 10 documents every
    document is a candidate on each side, so the search fuses what the exact scan fuses: recall 1."""
    import argparse

    from lengthwise.search.types import FusionSettings

    root = work / "stage"
    root.mkdir()
    for name in ("qmsum", "scifact"):
        (root / name).symlink_to(work / name)
    results = tmp_path / "bench_hybrid.json"
    monkeypatch.setattr(bench._common, "RESULTS", results)  # patched where the stages read it (_common)
    common = {"work": root, "windows": WINDOWS, "queries": 8, "repeats": 1, "recall_queries": 8, "build_only": False}
    bench.stage_scale(argparse.Namespace(**common, granularity="window", fusion="convex"))
    convex = json.loads(results.read_text())["scale"][str(WINDOWS)]
    bench.stage_scale(argparse.Namespace(**common, granularity="both", fusion="default"))
    bench.stage_scale(argparse.Namespace(**common, granularity="window", fusion="convex", label="rerun"))
    scale = json.loads(results.read_text())["scale"]
    both = scale[f"{WINDOWS}-both-default"]
    assert scale[str(WINDOWS)] == convex and "fusion" not in convex  # a labelled re-run is recorded beside it
    assert scale[f"{WINDOWS}-rerun"]["lexical_reused"] and scale[f"{WINDOWS}-rerun"]["recall_at_10_vs_exact_fused"] == 1
    assert both["fusion"] == FusionSettings().to_dict() and both["granularity"] == "both"
    assert (both["recall_at_10_vs_exact_fused"], both["first_hit_agrees"]) == (1.0, 1.0)
    assert convex["recall_at_10_vs_exact_fused"] == 1.0
    assert both["dense_reused"] and not both["lexical_reused"] and both["lexical_build_s"] is not None
    assert both["lexical_bytes_per_doc"] > convex["lexical_bytes_per_doc"]  # whole documents besides the windows
    assert both["bm25_bytes_per_doc"] > convex["bm25_bytes_per_doc"]
    for section in (convex, both):
        assert section["latency"]["hybrid"]["clients_8"]["p50_ms"] > 0
        assert section["hybrid_over_dense_p50_clients_1"] > 0
