"""Stage ``engines`` of the hybrid benchmark: bm25s against tantivy on the same documents (build time, peak
memory, bytes on disk, query latency), each engine in a process of its own (the ``engine-run`` command)."""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._measure import disk_bytes, peak_rss_bytes
from benchmarks.search.hybrid._common import MODULE, _load, _scale_texts, _write


def stage_engines(args: argparse.Namespace) -> None:
    """bm25s and tantivy on the same documents, each in its own process (peak memory is the process's)."""
    started, load_before = time.perf_counter(), _load()
    rows = {}
    for engine in ("bm25s", "tantivy"):
        out = subprocess.run([sys.executable, "-m", MODULE, "engine-run", engine, "--docs", str(args.docs),
                              "--work", str(args.work)], capture_output=True, text=True, check=True)  # fmt: skip
        rows[engine] = json.loads(out.stdout.strip().splitlines()[-1])
        print(engine, rows[engine], flush=True)
    _write("engines", {"docs": args.docs, "rows": rows, "seconds": round(time.perf_counter() - started),
                       "load": [load_before, _load()]})  # fmt: skip


def _engine_run(engine: str, docs: int, work: Path) -> dict[str, Any]:
    texts = _scale_texts(docs)
    rng = random.Random(1)
    queries = [" ".join(rng.sample(texts[rng.randrange(docs)].split(), 6)) for _ in range(200)]
    folder = work / f"engine-{engine}"
    shutil.rmtree(folder, ignore_errors=True)
    base = peak_rss_bytes() / 2**20
    started = time.perf_counter()
    search = _build_bm25s(texts, folder) if engine == "bm25s" else _build_tantivy(texts, folder)
    built = time.perf_counter() - started
    del texts
    times = []
    for query in queries:
        t = time.perf_counter()
        search(query)
        times.append(1000 * (time.perf_counter() - t))
    size = disk_bytes(folder)
    peak = peak_rss_bytes() / 2**20
    return {"build_s": round(built, 1), "bytes_per_doc": round(size / docs, 1), "peak_rss_mb": round(peak),
            "rss_before_mb": round(base), "p50_ms": round(statistics.median(times), 2),
            "p99_ms": round(float(np.percentile(times, 99)), 2)}  # fmt: skip


def _build_bm25s(texts: list[str], folder: Path) -> Any:
    from lengthwise.search.lexical.bm25 import LexicalIndex

    index = LexicalIndex.build(texts, [np.zeros((1, 2), dtype=np.int64)] * len(texts), folder)

    def search(query: str) -> Any:
        scores = index.scores(query)
        top = np.argpartition(-scores, 100)[:100]
        return top[np.argsort(-scores[top])]

    return search


def _build_tantivy(texts: list[str], folder: Path) -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="en_stem")
    builder.add_integer_field("doc", stored=True, fast=True)  # Document(doc=n) is an i64
    schema = builder.build()
    folder.mkdir(parents=True)
    index = tantivy.Index(schema, path=str(folder))
    writer = index.writer(heap_size=256_000_000, num_threads=1)
    for n, text in enumerate(texts):
        writer.add_document(tantivy.Document(body=text, doc=n))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(query: str) -> Any:
        parsed = index.parse_query_lenient(query, ["body"])[0]
        return searcher.search(parsed, 100).hits

    return search
