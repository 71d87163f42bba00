"""What the hybrid benchmark's stages share: the paths, the results file (read and written a section at a time,
here only), the data sets, a corpus encoded and indexed through the product with its exact score matrices, the
lexical side's folder, the scale corpus's texts, the queries' words and their timing, and the batched exact fused
scan the scale stages (and search/milvus_scale.py) check the index against."""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
MODULE = "benchmarks.search.hybrid"  # run as python -m MODULE, from the repository root
RESULTS = ROOT / "docs" / "results" / "bench_hybrid.json"  # read and written here only (a test patches it here)
LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _write(section: str, payload: dict[str, Any]) -> None:
    from lengthwise.core.results import environment, write_json_atomic

    out = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    out[section] = {**payload, "environment": environment()}
    write_json_atomic(RESULTS, out)


def _read() -> dict[str, Any]:
    """Every section of the results file (the file must be there)."""
    return json.loads(RESULTS.read_text())


def _section(name: str) -> dict[str, Any]:
    """One section of the results file: {} when the file, or the section, is not there yet."""
    return json.loads(RESULTS.read_text()).get(name, {}) if RESULTS.is_file() else {}


# --- data sets --------------------------------------------------------------------------------------------------------


def corpus_options(parser: argparse.ArgumentParser, sets: str) -> None:
    """The options of a study over the repository's corpora: the work folder, each corpus's folder, the model, the
    threads and the corpora run (`sets`: the default)."""
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"))
    parser.add_argument("--qmsum", type=Path, default=ROOT / "data" / "qmsum")
    parser.add_argument("--newsgroups", type=Path, default=ROOT / "data" / "newsgroups")
    parser.add_argument("--replies", type=Path, default=ROOT / "data" / "replies")
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sets", default=sets, type=lambda v: v.split(","))


def _retrieval_sets(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """name → {"ids", "texts", "queries": {split: (ids, texts)}, "qrels"}: the BEIR folders of the repository
    (QMSum, 20 Newsgroups subjects and replies) and the SciFact sample."""
    from benchmarks.encode.longdoc_scifact import _sample
    from lengthwise.evaluation.data import read_beir

    out = {}
    folders = (("qmsum", args.qmsum), ("newsgroups", args.newsgroups), ("replies", args.replies))
    for name, folder in folders:  # BEIR folders with dev and test
        if name not in args.sets:
            continue
        data = {split: read_beir(folder, split) for split in ("dev", "test")}
        out[name] = {"ids": list(data["dev"].doc_ids), "texts": list(data["dev"].doc_texts),
                     "splits": {s: _queries(d) for s, d in data.items()},
                     "corpus": folder / "corpus.jsonl.gz"}  # fmt: skip
    if args.scifact.exists():
        data = _sample(read_beir(args.scifact, "test"), 450, 0)
        queries = [q for q in data.query_ids if q in data.qrels]
        random.Random(0).shuffle(queries)
        halves = {"dev": set(queries[: len(queries) // 2]), "test": set(queries[len(queries) // 2 :])}
        splits = {s: _queries(replace(data, query_ids=tuple(q for q in data.query_ids if q in keep),
                                      query_texts=tuple(t for q, t in zip(data.query_ids, data.query_texts,
                                                                          strict=True) if q in keep)))
                  for s, keep in halves.items()}  # fmt: skip
        out["scifact"] = {"ids": list(data.doc_ids), "texts": list(data.doc_texts), "splits": splits}
    else:
        print(f"SciFact skipped: {args.scifact} is absent", flush=True)
    return out


def _queries(data: Any) -> dict[str, Any]:
    keep = [(q, t) for q, t in zip(data.query_ids, data.query_texts, strict=True) if q in data.qrels]
    return {"ids": [q for q, _ in keep], "texts": [t for _, t in keep], "qrels": {q: data.qrels[q] for q, _ in keep}}


def _synthetic_sets(args: argparse.Namespace, tokenizer: Any) -> dict[str, dict[str, Any]]:
    from lengthwise.core._textio import open_text
    from lengthwise.longdoc.tasks.synthetic import make_synthetic

    haystack = []
    for path in sorted((ROOT / "data" / "essays").glob("*.txt.gz")):
        with open_text(path) as handle:
            haystack.extend(line.strip() for _, line in handle.lines() if line.strip())
    out = {}
    for task in ("passkey", "needle"):
        for split, seed, per in (("dev", 1, args.dev_per_length), ("test", 0, args.per_length)):
            data = make_synthetic(task, haystack, tokenizer, lengths=LENGTHS, per_length=per, seed=seed)
            out[f"{task}-{split}"] = {"ids": [f"d{i}" for i in range(len(data.items))],
                                      "texts": [item.text for item in data.items], "data": data}  # fmt: skip
    return out


def _scifact_beir(args: argparse.Namespace) -> Path:
    """The SciFact sample as a BEIR folder with the dev/test halves of its queries (as the quality stage split)."""
    folder = args.work / "scifact" / "beir"
    entry = _retrieval_sets(args)["scifact"]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    rows = [{"_id": i, "text": t} for i, t in zip(entry["ids"], entry["texts"], strict=True)]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    queries = [{"_id": q, "text": t} for split in entry["splits"].values()
               for q, t in zip(split["ids"], split["texts"], strict=True)]  # fmt: skip
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    for name, split in entry["splits"].items():
        lines = [f"{q}\t{d}\t{r}\n" for q, docs in split["qrels"].items() for d, r in docs.items()]
        (folder / "qrels" / f"{name}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(lines))
    return folder


# --- one data set through the product ---------------------------------------------------------------------------------


def _indexed(name: str, ids: list[str], texts: list[str], args: argparse.Namespace, corpus: Path | None = None) -> Any:
    """Encode (resumable) and index one corpus with the defaults (`corpus`: its file, else written from `ids`
    and `texts`); reused when already built."""
    import lengthwise as lw

    work = args.work / name
    work.mkdir(parents=True, exist_ok=True)
    if corpus is None:
        corpus = work / "corpus.jsonl"
        rows = "".join(json.dumps({"_id": i, "text": t}) + "\n" for i, t in zip(ids, texts, strict=True))
        if not corpus.is_file() or corpus.read_text() != rows:
            corpus.write_text(rows)
    started = time.perf_counter()
    lw.encode(corpus, work / "encoded", args.model, threads=args.threads, show_progress=True)
    encoded = time.perf_counter() - started
    if not _has_lexical(work / "index"):
        lw.LongIndex.build(work / "encoded", work / "index", granularity="document")  # the window BM25: beside it
    index = lw.LongIndex.open(work / "index")
    print(f"{name}: {len(ids)} documents, {index.settings['windows']} windows (encode {encoded:.0f} s, "
          f"load {_load()})", flush=True)  # fmt: skip
    return index


def _score_matrices(index: Any, queries: list[str], args: argparse.Namespace) -> dict[str, np.ndarray]:
    """(Q, n) exact scores of every document: dense (fp32 windows), BM25 over documents and over windows."""
    from lengthwise.core.encoder import MultiVectors, multi_vector_scores
    from lengthwise.search.lexical.bm25 import LexicalIndex

    vectors = torch.nn.functional.normalize(torch.as_tensor(np.asarray(index.embed_queries(queries))), dim=-1)
    documents = MultiVectors(np.asarray(index.vectors), index.offsets)
    dense = multi_vector_scores(vectors, documents, index.scoring).double().numpy()
    lexical = index.lexical
    if lexical.settings["granularity"] != "document":
        raise SystemExit(f"error: {index.folder} holds {lexical.settings['granularity']} BM25; the quality stage "
                         "builds its index with whole-document BM25 and the window BM25 beside it")  # fmt: skip
    folder = Path(index.folder).parent / "lexical-window"
    if not (folder / "lexical.json").is_file():
        texts = [lexical.text(n) for n in range(lexical.settings["documents"])]
        offsets = lexical.window_offsets
        spans = [np.asarray(lexical.spans[a:b]) for a, b in itertools.pairwise(offsets)]
        LexicalIndex.build(texts, spans, folder, granularity="window")
    windows = LexicalIndex.open(folder)
    return {"dense": dense, "document": np.stack([lexical.scores(q) for q in queries]).astype(np.float64),
            "window": np.stack([windows.scores(q) for q in queries]).astype(np.float64)}  # fmt: skip


def _lexical_folder(index: Path, granularity: str) -> Path:
    """Where the scale stage keeps its lexical side: ``lexical`` in the generation served (the index's own, BM25 over
    the windows), or ``lexical-{granularity}`` beside it in the index folder: ``lexical-document`` (whole documents,
    the granularity the docs advise above a few million windows) or ``lexical-both`` (the window side with whole
    documents in ``document/`` inside it, `Granularity.BOTH`: an index's default); the benchmark opens these
    explicitly (`lengthwise.search.lexical.bm25.open_lexical`)."""
    from lengthwise.search.local.files import served_files

    return served_files(index) / "lexical" if granularity == "window" else index / f"lexical-{granularity}"


def _has_lexical(index: Path) -> bool:
    """Whether the index folder `index` exists and serves a lexical side."""
    from lengthwise.longdoc.config import LongDocError

    try:
        return (_lexical_folder(index, "window") / "lexical.json").is_file()
    except LongDocError:  # no index there
        return False


# --- the scale corpus's texts, the queries' words, their timing -------------------------------------------------------


def _scale_texts(docs: int) -> list[str]:
    """Documents of 150–600 words drawn from the essays (seeded), each with one unique code word."""
    from lengthwise.core._textio import open_text

    words: list[str] = []
    for path in sorted((ROOT / "data" / "essays").glob("*.txt.gz")):
        with open_text(path) as handle:
            for _, line in handle.lines():
                words.extend(line.split())
    rng = random.Random(0)
    texts = []
    for n in range(docs):
        size, start = rng.randint(150, 600), rng.randrange(len(words) - 600)
        texts.append(" ".join(words[start : start + size]) + f" code{n:07d}")
    return texts


def _five_words(texts: list[str], rng: np.random.Generator) -> list[str]:
    """A query per text: 5 of its words, in their order (the scale and text-side stages' queries)."""
    words = [text.split() for text in texts]
    return [" ".join(w[i] for i in sorted(rng.choice(len(w), 5, replace=False))) for w in words]


def _timed(search: Any, queries: list[Any], clients: int) -> dict[str, float]:
    """p50 / p99 ms per query with `clients` threads issuing queries at once, and queries per second."""
    from concurrent.futures import ThreadPoolExecutor

    def one(query: Any) -> float:
        t = time.perf_counter()
        search(query)
        return 1000 * (time.perf_counter() - t)

    for query in queries[:5]:
        search(query)  # warm the page cache and the engine
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        times = list(pool.map(one, queries))
    wall = time.perf_counter() - started
    return {"p50_ms": round(statistics.median(times), 2), "p99_ms": round(float(np.percentile(times, 99)), 2),
            "qps": round(len(queries) / wall, 1)}  # fmt: skip


# --- the exact fused scan ---------------------------------------------------------------------------------------------


def _exact_fused_batched(
    searcher: Any, fusion: Any, queries: np.ndarray, texts: list[str], k: int, block: int = 500_000
) -> list:
    """`lengthwise.search.exact.exact_ranked` (hybrid, fused by `fusion`) of many queries in one pass over the
    `searcher`'s windows, `block` windows (whole documents) at a time: the same scoring and fusion
    (`lengthwise.search.fusion.fuse_exact` over every lexical side, its `side_scores`: the whole corpus for convex, the
    union of each side's exact best for a rule that depends on the candidates), but the fp32 vectors are read once
    for all queries instead of once per query and never held whole (at 10M windows they are 15 GB, and
    `exact_ranked` copies every one of them per query)."""
    from lengthwise.core.encoder import MultiVectors, multi_vector_scores
    from lengthwise.search.fusion import fuse_exact

    windows = searcher.store
    units = torch.nn.functional.normalize(torch.as_tensor(np.asarray(queries, dtype=np.float32)), dim=-1)
    offsets, dense, first = np.asarray(windows.offsets), [], 0
    while first < len(offsets) - 1:
        last = max(first + 1, int(np.searchsorted(offsets, offsets[first] + block, side="right")) - 1)
        part = MultiVectors(np.asarray(windows.vectors[offsets[first] : offsets[last]]),
                            offsets[first : last + 1] - offsets[first])  # fmt: skip
        dense.append(multi_vector_scores(units, part, searcher.scoring, unit=True).numpy().astype(np.float64))
        first = last
    scores = np.concatenate(dense, axis=1)
    depth = max(fusion.depth, 10 * k)  # as `exact_ranked` and the search
    out = []
    for row, text in zip(scores, texts, strict=True):
        fused = fuse_exact(row, searcher.lexical.side_scores(text).astype(np.float64), fusion, depth)
        best = np.argsort(-fused, kind="stable")[:k]
        out.append([(windows.doc_ids[d], float(fused[d])) for d in best if np.isfinite(fused[d])])
    return out


def _against_exact(searcher: Any, fusion: Any, vectors: np.ndarray, texts: list[str], exact: list) -> dict[str, Any]:
    """The hybrid top 10 (fused by `fusion`) of the first ``len(exact)`` queries against `exact`
    (`_exact_fused_batched`'s (id, fused score) lists): the share of the exact top 10 found, how often the first hit
    agrees, the share of missed documents whose exact fused score is within 1 % of the 10th found, and the fused
    score the top 10 keeps (theirs summed ÷ the exact top 10's). The last two compare fused scores, which a rule that
    depends on the candidates (z-score, ``--fusion default``) computes over other documents in the search than in the
    exact scan: only the recall and the first hit are comparable there."""
    from lengthwise.core.fusion import Mode

    recall, first, near, kept = [], [], [], []
    for n, best in enumerate(exact):
        hits = searcher.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.HYBRID, fusion)[0]
        ids = {hit.id for hit in hits}
        missed = [score for doc, score in best if doc not in ids]
        recall.append(1 - len(missed) / 10)
        first.append(hits[0].id == best[0][0])
        near += [score <= 1.01 * hits[-1].score for score in missed]
        kept.append(sum(hit.score for hit in hits) / sum(score for _, score in best))
    return {"recall_at_10_vs_exact_fused": round(float(np.mean(recall)), 4),
            "first_hit_agrees": round(float(np.mean(first)), 4),
            "missed_within_1pct_of_10th": round(float(np.mean(near)), 4) if near else None,
            "fused_score_kept": round(float(np.mean(kept)), 5)}  # fmt: skip
