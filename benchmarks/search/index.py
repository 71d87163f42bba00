#!/usr/bin/env python
"""Benchmark: document search through `lengthwise.search.index` against the exact scan of the same vectors
(issue 23).

Stages (each writes its own section of the JSON; earlier sections are kept, so a stage can be re-run alone):

- ``quality``: SciFact (BEIR test split) encoded multi-vector (64-token windows, stride 32) by all-MiniLM-L6-v2
  (``lengthwise encode``, cached in ``--cache``, resumable). For each engine × quantization: nDCG@10 through the
  index and by the exact scan of the same window vectors (pytrec_eval, as `lengthwise eval` scores), the
  candidate stage's document-level recall@100 against the exact top 100, and per-query latency. ubinary is
  measured with rescoring (the default) and without it (documents ranked by their best candidate window's
  Hamming similarity).
- ``synthetic``: the realistic passkey and needle test sets of encode/longdoc_defaults.py (300 documents each,
  256–8,192 tokens, essays haystack, seed 0) encoded with the recommended setting (``--long default``): Acc@1
  over the whole set through each index against the exact scan of the same windows, the candidate stage's
  document-level recall@100, and ubinary without rescoring.
- ``connectivity``: USearch int8 at graph degrees 8, 12 and 16 on SciFact and the passkey/needle sets: engine
  bytes per window and candidate recall@100 (can a sparser graph meet the 0.3× size goal?).
- ``oversample``: candidate recall@100 and nDCG@10 / Acc@1 of every quantized index of ``quality`` and
  ``synthetic`` (reused from ``--cache``, built where missing) with 1,000, 2,000 and 4,000 candidate windows per
  query, and SciFact's ms per query: how many candidates do binary codes need to reach 0.98?
- ``scale``: 1 million window vectors (``--windows``; another count writes the section ``scale_{count}``) of 384
  dimensions: the SciFact window vectors repeated with
  small seeded Gaussian noise (σ = 0.02, renormalised) to reach the count, 20 windows per document. For each
  engine × quantization: engine file bytes per window against fp32 (1,536 bytes), build time, single-query
  latency p50/p99 at k = 10 over 200 queries (SciFact queries), and peak RSS of a fresh process that opens the
  index and runs the queries (the fp32 vectors stay memory-mapped). ``--arms`` picks engine/quantize pairs; each
  arm's row is saved when it ends, and a rerun skips the arms already saved (a killed run resumes).
- ``probe``: the scale stage's queries again, alone, on the indexes it built (``probe_again`` in each row).
- ``duplicated`` (issue 33.0; no data set or model needed): a corpus shaped like the LongEmbed passkey protocol,
  where every document is the same filler text around one needle: 250 documents of 20 to 250 windows of 384
  dimensions, each a run of a 600-vector filler cycle (all vectors share a common direction, as sentence
  embeddings do) with one window of its own; the query of a document is its needle plus Gaussian noise. For each
  engine × quantization: Acc@1 through the index against the exact scan, the candidate stage's recall@100, the
  documents ever returned first, and the windows against the distinct vectors the engine holds.

The load average is recorded before and after each stage.

    python -m benchmarks.search.index quality synthetic scale     # → docs/results/bench_index.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lengthwise.core.results import write_json_atomic

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("LENGTHWISE_DATA", REPO.parent / "shared" / "data"))
DEFAULT_OUT = REPO / "docs" / "results" / "bench_index.json"
SCIFACT = DATA / "scifact"
ARMS = (("faiss", "none"), ("faiss", "int8"), ("faiss", "ubinary"), ("usearch", "int8"), ("usearch", "ubinary"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402

from benchmarks._measure import ndcg_at_10, peak_rss_bytes  # noqa: E402


def _encoded(cache: Path) -> Path:
    """SciFact's corpus encoded multi-vector by all-MiniLM-L6-v2 (resumable; reused when complete)."""
    folder = cache / "scifact-mv64"
    if not (folder / "manifest.json").is_file() or not any(folder.glob("*.shard.json")):
        import lengthwise as lw

        corpus = next(p for p in (SCIFACT / "corpus.jsonl", SCIFACT / "corpus.jsonl.gz") if p.is_file())
        config = lw.LongDocConfig(strategy="multi-vector", window=64, stride=32)  # type: ignore[arg-type]
        lw.encode(corpus, folder, long=config, shard_docs=500, batch_size=64, show_progress=True)
    return folder


def _queries() -> tuple[list[str], list[str], dict[str, dict[str, int]]]:
    from lengthwise.evaluation.data import read_beir

    beir = read_beir(SCIFACT, "test")
    return list(beir.query_ids), list(beir.query_texts), beir.qrels


def _run(query_ids: list[str], rows: list[list[tuple[str, float]]]) -> dict[str, dict[str, float]]:
    return {qid: dict(row) for qid, row in zip(query_ids, rows, strict=True)}


def stage_quality(cache: Path) -> dict[str, Any]:
    import lengthwise as lw

    encoded = _encoded(cache)
    query_ids, texts, qrels = _queries()
    rows: dict[str, Any] = {}
    vectors = None
    for engine, quantize in ARMS:
        started = time.perf_counter()
        index = lw.LongIndex.build(encoded, cache / f"idx-{engine}-{quantize}", quantize=quantize, engine=engine)
        build_s = time.perf_counter() - started
        if vectors is None:
            vectors = index.embed_queries(texts)
            exact = index.exact_vectors(vectors, k=100)
            rows["exact"] = {"ndcg@10": ndcg_at_10(qrels, _run(query_ids, exact))}
        started = time.perf_counter()
        found = index.search_vectors(vectors, k=100)
        latency_ms = 1000 * (time.perf_counter() - started) / len(texts)
        recall = _candidate_recall(index, vectors, exact)
        row = {
            "ndcg@10": ndcg_at_10(qrels, _run(query_ids, [r[:10] for r in found])),
            "candidate_recall@100": recall,
            "ms_per_query": latency_ms,
            "build_s": build_s,
        }
        if quantize == "ubinary":  # without rescoring: each candidate document at its best window's Hamming score
            row["ndcg@10_without_rescoring"] = ndcg_at_10(qrels, _run(query_ids, _unrescored(index, vectors)))
        rows[f"{engine}/{quantize}"] = row
        print(engine, quantize, row, flush=True)
    return {
        "rows": rows,
        "documents": index.settings["documents"],
        "windows": index.settings["windows"],
    }


LENGTHS = (256, 512, 1024, 2048, 4096, 8192)  # encode/longdoc_defaults.py's test sets: 50 documents per length


def _synthetic_set(cache: Path, task: str) -> tuple[Path, list[str], list[str]]:
    """The realistic passkey or needle test set of encode/longdoc_defaults.py (essays haystack, seed 0), encoded with
    the recommended long-document setting by `lengthwise encode` (cached, resumable): (folder, queries, gold ids)."""
    import lengthwise as lw
    from lengthwise.core._textio import open_text
    from lengthwise.longdoc.tasks.synthetic import make_synthetic

    haystack: list[str] = []
    for path in sorted((REPO / "data" / "essays").glob("*.txt.gz")):
        with open_text(path) as handle:
            haystack.extend(line.strip() for _, line in handle.lines() if line.strip())
    tokenizer = lw.load_model().tokenizer
    data = make_synthetic(task, haystack, tokenizer, lengths=LENGTHS, per_length=50, seed=0)  # type: ignore[arg-type]
    ids = [f"{task}-{i}" for i in range(len(data.items))]
    folder = cache / f"{task}-test-default"
    if not (folder / "manifest.json").is_file() or not any(folder.glob("*.shard.json")):
        corpus = cache / f"{task}-test.jsonl"
        rows = [{"_id": doc_id, "text": item.text} for doc_id, item in zip(ids, data.items, strict=True)]
        corpus.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        lw.encode(corpus, folder, shard_docs=100, batch_size=64, show_progress=True)  # --long default
    return folder, [item.query for item in data.items], ids


def stage_synthetic(cache: Path) -> dict[str, Any]:
    """Acc@1 over the whole set (300 documents of 256–8,192 tokens) through each index against the exact scan of
    the same window vectors; ubinary also without rescoring."""
    import lengthwise as lw

    sections: dict[str, Any] = {}
    for task in ("passkey", "needle"):
        encoded, texts, gold = _synthetic_set(cache, task)
        rows: dict[str, Any] = {}
        vectors = None
        for engine, quantize in ARMS:
            index = lw.LongIndex.build(encoded, cache / f"idx-{task}-{engine}-{quantize}", quantize=quantize,
                                       engine=engine)  # fmt: skip
            if vectors is None:
                vectors = index.embed_queries(texts)
                exact = index.exact_vectors(vectors, k=100)
                rows["exact"] = {"acc@1": _accuracy(exact, gold)}
            found = index.search_vectors(vectors, k=100)
            recall = _candidate_recall(index, vectors, exact)
            row = {"acc@1": _accuracy(found, gold), "candidate_recall@100": recall}
            if quantize == "ubinary":
                row["acc@1_without_rescoring"] = _accuracy(_unrescored(index, vectors), gold)
            rows[f"{engine}/{quantize}"] = row
            print(task, engine, quantize, row, flush=True)
        sections[task] = {"rows": rows, "documents": len(gold), "windows": index.settings["windows"]}
    return sections


OVERSAMPLE = (1000, 2000, 4000)


def stage_oversample(cache: Path) -> dict[str, Any]:
    """Each quantized arm of `quality` and `synthetic` with 1,000 / 2,000 / 4,000 candidate windows per query."""
    import lengthwise as lw

    query_ids, scifact_texts, qrels = _queries()
    sets = {"scifact": (_encoded(cache), scifact_texts, None)}
    for task in ("passkey", "needle"):
        encoded, texts, gold = _synthetic_set(cache, task)
        sets[task] = (encoded, texts, gold)
    sections: dict[str, Any] = {}
    for name, (encoded, texts, gold) in sets.items():
        rows: dict[str, Any] = {}
        vectors = exact = None
        for engine, quantize in ARMS:
            if quantize == "none":
                continue
            folder = cache / (f"idx-{engine}-{quantize}" if name == "scifact" else f"idx-{name}-{engine}-{quantize}")
            index = (lw.LongIndex.open(folder) if (folder / "index.json").is_file()
                     else lw.LongIndex.build(encoded, folder, quantize=quantize, engine=engine))  # fmt: skip
            if vectors is None:
                vectors = index.embed_queries(texts)
                exact = index.exact_vectors(vectors, k=100)
            assert exact is not None
            for count in OVERSAMPLE:
                started = time.perf_counter()
                found = index.search_vectors(vectors, k=100, candidates=count)
                row = {"candidate_recall@100": _candidate_recall(index, vectors, exact, count),
                       "ms_per_query": 1000 * (time.perf_counter() - started) / len(texts)}  # fmt: skip
                if gold is None:
                    row["ndcg@10"] = ndcg_at_10(qrels, _run(query_ids, [r[:10] for r in found]))
                else:
                    row["acc@1"] = _accuracy(found, gold)
                rows[f"{engine}/{quantize}/{count}"] = row
                print(name, engine, quantize, count, row, flush=True)
        sections[name] = {"rows": rows}
    return sections


def stage_connectivity(cache: Path) -> dict[str, Any]:
    """USearch int8 at graph degrees 8, 12 and 16 (its default) on SciFact and the passkey/needle sets: engine bytes
    per window and the candidate stage's document-level recall@100. Measures whether a sparser graph would meet
    the 0.3× size goal; lengthwise keeps USearch's default. The degree is set by wrapping `usearch.index.Index`."""
    import usearch.index

    import lengthwise as lw

    real = usearch.index.Index.__init__
    sets = {"scifact": (_encoded(cache), _queries()[1])}
    sets.update({task: _synthetic_set(cache, task)[:2] for task in ("passkey", "needle")})
    rows: dict[str, Any] = {}
    try:
        for degree in (8, 12, 16):
            usearch.index.Index.__init__ = lambda self, *a, d=degree, **k: real(self, *a, **{**k, "connectivity": d})
            for name, (encoded, texts) in sets.items():
                out = cache / f"conn-{name}-{degree}"
                index = lw.LongIndex.build(encoded, out, quantize="int8", engine="usearch")
                vectors = index.embed_queries(texts)
                exact = index.exact_vectors(vectors, k=100)
                rows[f"{degree}/{name}"] = {
                    "connectivity": degree,
                    "set": name,
                    "engine_bytes_per_window": (out / "engine.usearch").stat().st_size / index.settings["windows"],
                    "candidate_recall@100": _candidate_recall(index, vectors, exact),
                }
                print(rows[f"{degree}/{name}"], flush=True)
    finally:
        usearch.index.Index.__init__ = real
    return {"rows": rows, "fp32_bytes_per_window": 1536}


def _accuracy(rows: list[list[tuple[str, float]]], gold: list[str]) -> float:
    return 100 * statistics.mean(float(bool(row) and row[0][0] == want) for row, want in zip(rows, gold, strict=True))


def _candidate_recall(
    index: Any, vectors: Any, exact: list[list[tuple[str, float]]], count: int | None = None
) -> float:
    """Document-level recall of the candidate stage (`count` windows, default: the index's; default probes) against
    the exact top 100."""
    windows = index.windows  # the index's window store: its engine's candidates
    count = count if count is not None else windows.default_candidates()
    found = windows.candidate_documents(np.asarray(vectors, dtype=np.float32), count, windows.default_probes())
    return statistics.mean(
        len({index.doc_ids[j] for j in docs} & {d for d, _ in ex}) / len(ex)
        for docs, ex in zip(found, exact, strict=True)
    )


def _unrescored(index: Any, vectors: Any, count: int = 1000) -> list[list[tuple[str, float]]]:
    """Rank each query's candidate documents by the Hamming similarity of their best candidate window."""
    bits = np.packbits(np.asarray(index.vectors) > 0, axis=-1)
    windows = index.windows  # the index's window store: its engine's candidates
    out = []
    for query in np.asarray(vectors, dtype=np.float32):
        found = windows.candidate_windows(query[None], count, windows.default_probes())[0]  # all their windows
        q = np.packbits(query > 0)
        similarity = -np.unpackbits(bits[found] ^ q, axis=-1).sum(axis=1).astype(np.float64)
        owner = np.searchsorted(index.offsets, found, side="right") - 1
        best: dict[int, float] = {}
        for doc, score in zip(owner.tolist(), similarity.tolist(), strict=True):
            best[doc] = max(best.get(doc, -1e9), score)
        ranked = sorted(best.items(), key=lambda item: -item[1])[:100]
        out.append([(index.doc_ids[d], s) for d, s in ranked])
    return out


def _duplicated_corpus(folder: Path, docs: int = 250, cycle: int = 600, dim: int = 384) -> np.ndarray:
    """The ``duplicated`` stage's shard folder (see the module docstring); returns the queries (docs, dim)."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import EmbeddingStore

    rng = np.random.default_rng(0)
    common = rng.normal(size=dim).astype(np.float32)
    filler = (2 * common + rng.normal(size=(cycle, dim))).astype(np.float32)
    needles = (2 * common + rng.normal(size=(docs, dim))).astype(np.float32)
    counts = rng.integers(20, 251, size=docs)
    rows = []
    for doc, count in enumerate(counts):
        windows = filler[(rng.integers(cycle) + np.arange(count)) % cycle].copy()
        windows[rng.integers(count)] = needles[doc]
        rows.append(windows)
    if not (folder / "manifest.json").is_file():
        store = EmbeddingStore(folder, {"model": "random", "long": {"strategy": "multi-vector"}})
        offsets = np.concatenate([[0], np.cumsum(counts)])
        store.write("w0-", [f"d{i}" for i in range(docs)], MultiVectors(np.concatenate(rows), offsets))
    return needles + 4 * rng.normal(size=needles.shape).astype(np.float32)


def stage_duplicated(cache: Path) -> dict[str, Any]:
    """Acc@1 through each index against the exact scan on a corpus of heavily duplicated windows (issue 33.0)."""
    from lengthwise.facade import LongIndex

    encoded = cache / "duplicated"
    queries = _duplicated_corpus(encoded)
    gold = [f"d{i}" for i in range(len(queries))]
    rows: dict[str, Any] = {}
    exact = None
    for engine, quantize in ARMS:
        folder = cache / f"idx-duplicated-{engine}-{quantize}"
        started = time.perf_counter()
        index = LongIndex.build_windows(encoded, folder, quantize=quantize, engine=engine)
        built = time.perf_counter() - started
        if exact is None:
            exact = index.exact_vectors(queries, k=100)
            rows["exact"] = {"acc@1": _accuracy(exact, gold)}
        found = index.search_vectors(queries, k=100)
        engine_bytes = sum(p.stat().st_size for p in folder.glob("engine.*"))
        rows[f"{engine}/{quantize}"] = {
            "acc@1": _accuracy(found, gold),
            "candidate_recall@100": _candidate_recall(index, queries, exact),
            "documents_returned_first": len({row[0][0] for row in found if row}),
            "distinct_vectors": index.settings.get("distinct", index.settings["windows"]),
            "engine_bytes": engine_bytes,
            "build_seconds": round(built, 2),
        }
        print(engine, quantize, rows[f"{engine}/{quantize}"], flush=True)
    return {"rows": rows, "documents": len(gold), "windows": index.settings["windows"]}


def _synthetic(cache: Path, windows: int) -> Path:
    """A shard folder of `windows` vectors: SciFact windows repeated with seeded noise, 20 windows per document."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import EmbeddingStore, read_embeddings

    folder = cache / f"synthetic-{windows}"
    per_doc, chunk = 20, 100_000
    records = sorted(folder.glob("*.shard.json"))
    if sum(json.loads(r.read_text())["ids"] for r in records) == windows // per_doc:
        return folder  # complete (a killed generation leaves fewer documents: it starts again)
    import shutil

    shutil.rmtree(folder, ignore_errors=True)
    _, base = read_embeddings(_encoded(cache))
    source = base.vectors if isinstance(base, MultiVectors) else base
    manifest = json.loads((_encoded(cache) / "manifest.json").read_text())["settings"]
    store = EmbeddingStore(folder, {**manifest, "synthetic_windows": windows})
    rng = np.random.default_rng(0)
    for first in range(0, windows, chunk):
        count = min(chunk, windows - first)
        picked = source[rng.integers(0, len(source), size=count)] + rng.normal(0, 0.02, size=(count, source.shape[1]))
        picked = (picked / np.linalg.norm(picked, axis=1, keepdims=True)).astype(np.float32)
        docs = count // per_doc
        ids = [f"s{(first // per_doc) + i}" for i in range(docs)]
        offsets = np.arange(0, docs * per_doc + 1, per_doc, dtype=np.int64)
        store.write("w0-", ids, MultiVectors(picked[: docs * per_doc], offsets))
    return folder


PROBE = """
import json, statistics, sys, time
import numpy as np

def status_mb(key):
    # this process's own memory map; ru_maxrss would also count the parent's RSS at fork time
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

from lengthwise.facade import LongIndex
folder, queries = sys.argv[1], np.load(sys.argv[2])
started = time.perf_counter()
index = LongIndex.open(folder)
opened = time.perf_counter() - started
times = []
for query in queries:
    t = time.perf_counter(); index.search_vectors(query[None], k=10); times.append(1000 * (time.perf_counter() - t))
times.sort()
# VmHWM is the peak of all resident pages; at the end, RssAnon is this process's own memory (model, index, buffers)
# and RssFile the file-backed pages: the memory-mapped fp32 windows that rescoring read, and the engine file if
# mapped. File pages are page cache: the kernel drops them under pressure, so they do not bound the process.
print(json.dumps({"open_s": opened, "candidates": index.windows.default_candidates(),
                  "p50_ms": statistics.median(times), "p99_ms": times[int(0.99 * (len(times) - 1))],
                  "peak_rss_mb": status_mb("VmHWM"), "rss_anon_mb": status_mb("RssAnon"),
                  "rss_file_mb": status_mb("RssFile")}))
"""


SCALE_ARMS = ("faiss/int8", "faiss/ubinary", "usearch/int8", "usearch/ubinary")


def _probe(out: Path, cache: Path) -> dict[str, Any]:
    """Open the index `out` in a fresh process and time 200 single queries there (`PROBE`), with its memory."""
    load_before = os.getloadavg()
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), str(cache / "queries.npy")], capture_output=True, text=True, check=True
    )
    return {**json.loads(probe.stdout.strip().splitlines()[-1]), "load_before": load_before,
            "load_after": os.getloadavg()}  # fmt: skip


def stage_probe(cache: Path, windows: int, arms: list[str], section: dict[str, Any], save: Any) -> dict[str, Any]:
    """The scale stage's queries again on indexes it already built, alone: a row's `probe_again` (its build and
    first probe are kept), for a first probe that ran beside another job."""
    for arm in arms:
        if arm in section.get("rows", {}):
            engine, quantize = arm.split("/")
            section["rows"][arm]["probe_again"] = _probe(cache / f"scale-{windows}-{engine}-{quantize}", cache)
            print(arm, section["rows"][arm]["probe_again"], flush=True)
            save(section)
    return section


def stage_scale(cache: Path, windows: int, arms: list[str], done: dict[str, Any], save: Any) -> dict[str, Any]:
    """Each arm of `arms` not already in `done` (a resumed run keeps them); `save(section)` after each arm."""
    from tqdm.auto import tqdm

    import lengthwise as lw
    from lengthwise.facade import LongIndex

    encoded = _synthetic(cache, windows)
    _, texts, _ = _queries()
    base = lw.LongIndex.open(cache / "idx-faiss-int8")  # the quality stage's index: the same model and settings
    queries = np.asarray(base.embed_queries(texts[:200]), dtype=np.float32)
    np.save(cache / "queries.npy", queries)
    rows = dict(done)
    section = {"rows": rows, "windows": windows, "dim": 384, "fp32_bytes_per_window": 1536}
    for arm in arms:
        if arm in rows:
            continue
        engine, quantize = arm.split("/")
        out = cache / f"scale-{windows}-{engine}-{quantize}"
        load_before, started = os.getloadavg(), time.perf_counter()
        with tqdm(total=windows, unit="window", desc=f"build {arm}") as bar:
            LongIndex.build_windows(encoded, out, quantize=quantize, engine=engine,
                              on_progress=lambda done, _: bar.update(done - bar.n))  # fmt: skip
        build_s = time.perf_counter() - started
        engine_bytes = (out / f"engine.{engine}").stat().st_size
        row = {
            "build_s": build_s,
            "engine_bytes_per_window": engine_bytes / windows,
            "vs_fp32": engine_bytes / (windows * 384 * 4),
            **_probe(out, cache),
            "load_before": load_before,  # the build's, over the probe's own
            "load_after": os.getloadavg(),
        }
        rows[arm] = row
        print(arm, row, flush=True)
        save(section)
    return section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "stages",
        nargs="+",
        choices=("quality", "synthetic", "oversample", "connectivity", "scale", "probe", "duplicated"),
    )
    parser.add_argument("--windows", type=int, default=1_000_000)
    parser.add_argument("--arms", default=",".join(SCALE_ARMS), help="scale: engine/quantize pairs, comma-separated")
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("LENGTHWISE_CACHE", "/tmp/lengthwise-bench")))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    if set(args.stages) - {"duplicated"} and not (SCIFACT / "qrels" / "test.tsv").is_file():
        raise SystemExit(f"error: {SCIFACT}: SciFact not found; set LENGTHWISE_DATA to the shared data folder")
    args.cache.mkdir(parents=True, exist_ok=True)
    results = json.loads(args.out.read_text()) if args.out.is_file() else {}
    scale_key = "scale" if args.windows == 1_000_000 else f"scale_{args.windows}"  # the 1M section stays
    arms = [arm.strip() for arm in args.arms.split(",") if arm.strip()]
    if unknown := sorted(set(arms) - set(SCALE_ARMS)):
        raise SystemExit(f"error: --arms {','.join(unknown)}: use some of {','.join(SCALE_ARMS)}")

    def save_scale(section: dict[str, Any]) -> None:  # after each arm: a killed 10M run resumes at the next arm
        results[scale_key] = section
        write_json_atomic(args.out, results)

    for stage in args.stages:
        load_before, started = os.getloadavg(), time.perf_counter()
        if stage == "scale":
            done = results.get(scale_key, {}).get("rows", {})
            section = stage_scale(args.cache, args.windows, arms, done, save_scale)
        elif stage == "probe":  # rows of the scale section updated in place; its own timings stay
            stage_probe(args.cache, args.windows, arms, results.get(scale_key, {}), save_scale)
            continue
        else:
            stages = {"quality": stage_quality, "synthetic": stage_synthetic, "oversample": stage_oversample,
                      "connectivity": stage_connectivity, "duplicated": stage_duplicated}  # fmt: skip
            section = stages[stage](args.cache)
        section.update(
            load_before=load_before,
            load_after=os.getloadavg(),
            seconds=round(time.perf_counter() - started),
            date=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            peak_rss_mb_of_this_process=peak_rss_bytes() / 2**20,
        )
        results[scale_key if stage == "scale" else stage] = section
        write_json_atomic(args.out, results)  # after each stage: a later stage's failure keeps this one


if __name__ == "__main__":
    main()
