"""Stages ``text-side`` and ``window-query`` of the hybrid benchmark. ``text-side``: the peak memory and time of
`build_text_side` over ``--docs`` scale documents written as a corpus.jsonl, in the index's order and shuffled
(``--orders``), each in a fresh process (``--label`` names the code measured). ``window-query``: a window-granularity
text-side build's BM25 query through `LexicalIndex.scores`' two paths, alternated, after checking they agree to the
bit."""

from __future__ import annotations

import argparse
import itertools
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

from benchmarks._measure import disk_bytes
from benchmarks.search.hybrid._common import _five_words, _lexical_folder, _load, _scale_texts, _section, _timed, _write

TEXT_SIDE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the text-side stage cuts windows with its tokenizer


def _text_side_inputs(work: Path, docs: int, order: str) -> Path:
    """The text-side stage's inputs under `work` (reused): `_scale_texts` as a corpus.jsonl, in the index's order
    (``same``) or a seeded shuffle of it (``shuffled``: a corpus encoded by several workers, or repaired, is indexed
    in another order than its file's), and each document's window count under ``--long default`` (counts.npy)."""
    from lengthwise.longdoc.config import RECOMMENDED
    from lengthwise.longdoc.encoder import LongEncoder
    from lengthwise.longdoc.method import char_spans

    folder = work / f"text-side-{docs}"
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / f"corpus-{order}.jsonl"
    texts = _scale_texts(docs)
    if not corpus.is_file():
        rows = list(range(docs))
        if order == "shuffled":
            random.Random(3).shuffle(rows)
        part = corpus.with_suffix(".part")
        part.write_text("".join(json.dumps({"_id": f"s{n}", "text": texts[n]}) + "\n" for n in rows))
        part.rename(corpus)
    if not (folder / "counts.npy").is_file():
        import lengthwise as lw

        encoder = LongEncoder(lw.load_model(TEXT_SIDE_MODEL), RECOMMENDED)
        cut = lambda ids: encoder.spans(ids, "document")  # noqa: E731
        np.save(folder / "counts.npy", np.asarray([len(char_spans(encoder.tokenizer, cut, t)) for t in texts]))
    return corpus


def _text_side_build(corpus: Path, docs: int) -> dict[str, Any]:
    """`build_text_side` over `corpus` (run in its own process): seconds, and resident memory before the call (the
    model and the index's ids loaded) and at its peak (VmHWM), in MB."""
    from types import SimpleNamespace

    import lengthwise as lw
    from lengthwise.longdoc.config import RECOMMENDED
    from lengthwise.longdoc.method import LONG_DOCUMENTS
    from lengthwise.longdoc.storage.store import corpus_digests, texts_sha256
    from lengthwise.search.lexical.build import build_text_side

    def memory(key: str) -> int:
        return round(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(key)) / 1024)

    counts = np.load(corpus.parent / "counts.npy")
    out = corpus.parent / f"index-{corpus.stem}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    windows = SimpleNamespace(doc_ids=[f"s{n}" for n in range(docs)], folder=out, files=out, settings={},
                              offsets=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))  # fmt: skip
    # the window cut as `LongIndex.build` makes it: the long-document method's, over the model and its settings
    cut = LONG_DOCUMENTS.window_cut(lw.load_model(TEXT_SIDE_MODEL), RECOMMENDED.to_dict())
    recorded = texts_sha256(corpus_digests(corpus))  # as `LongIndex.build` checks the corpus before the model loads
    before, started = memory("VmRSS:"), time.perf_counter()
    build_text_side(windows, cut, corpus, recorded=recorded)
    return {"seconds": round(time.perf_counter() - started, 1), "rss_before_mb": before, "peak_mb": memory("VmHWM:")}


def stage_text_side(args: argparse.Namespace) -> None:
    """`build_text_side`'s peak memory and time over a corpus file of `args.docs` scale documents, in the index's
    order and/or shuffled (`args.orders`), each in a fresh child process (nothing else of this process's memory
    counted); then, with `args.queries`, the lexical side's query latency on the build in the index's order."""
    rows = {}
    for order in args.orders:
        corpus = _text_side_inputs(args.work, args.docs, order)
        load_before = _load()
        code = (f"import sys, json; from benchmarks.search.hybrid import text_side as b; "
                f"from pathlib import Path; print(json.dumps(b._text_side_build(Path({str(corpus)!r}), "
                f"{args.docs})))")  # fmt: skip
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        rows[order] = {**json.loads(done.stdout.strip().splitlines()[-1]), "load": [load_before, _load()],
                       "corpus_mb": round(corpus.stat().st_size / 1e6)}  # fmt: skip
        print(order, rows[order], flush=True)
    if args.queries and "same" in args.orders:
        rows["lexical_query"] = _lexical_latency(args.work / f"text-side-{args.docs}" / "index-corpus-same", args)
    import lengthwise

    out = _section("text_side")
    section = {"documents": args.docs, "windows": int(np.load(corpus.parent / "counts.npy").sum()),
               "code": args.label, "lengthwise": str(Path(lengthwise.__file__).parent), **rows}  # fmt: skip
    _write("text_side", {**{k: v for k, v in out.items() if k != "environment"}, f"{args.docs}-{args.label}": section})


def _lexical_latency(index: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The lexical side's share of a hybrid query on a text-side build (`LexicalIndex.scores` of every document and
    the top max(100, 10·k) proposals, k = 10), alone and with 8 client threads (medians of the repeats), with the
    folder's bytes per document; the queries are 5 words of a random document, as in the scale stage."""
    from lengthwise.search.lexical.bm25 import LexicalIndex

    lexical = LexicalIndex.open(_lexical_folder(index, "window"))
    documents = lexical.settings["documents"]
    rng = np.random.default_rng(2)
    picks = rng.integers(0, documents, size=args.queries)
    queries = _five_words([lexical.text(int(d)) for d in picks], rng)

    def search(query: str) -> np.ndarray:
        scores = lexical.scores(query)
        return np.argpartition(-scores, 100)[:100]

    load_before, runs = _load(), dict[int, list[dict[str, float]]]()
    for _, clients in itertools.product(range(args.repeats), (1, 8)):
        runs.setdefault(clients, []).append(_timed(search, queries, clients))
        print("lexical", clients, runs[clients][-1], flush=True)
    latency = {f"clients_{c}": {key: round(statistics.median(run[key] for run in timed), 2) for key in timed[0]}
               for c, timed in runs.items()}  # fmt: skip
    size, bm25 = disk_bytes(_lexical_folder(index, "window")), disk_bytes(_lexical_folder(index, "window") / "bm25")
    return {"documents": documents, "queries": args.queries, "repeats": args.repeats, "latency": latency,
            "bytes_per_doc": round(size / documents), "bm25_bytes_per_doc": round(bm25 / documents),
            "load": [load_before, _load()]}  # fmt: skip


def stage_window_query(args: argparse.Namespace) -> None:
    """The window-granularity BM25 query of a text-side build (`--label`'s, BM25 over the windows) through both of
    `LexicalIndex.scores`' paths, alternated in one run: the default (the query terms' postings alone when they are
    fewer than windows / POSTINGS_PATH_SHARE, else every window) and every window always (the code before it); the
    scores are checked equal to the bit first."""
    from lengthwise.search.lexical import bm25 as module

    folder = _lexical_folder(args.work / f"text-side-{args.docs}" / "index-corpus-same", "window")
    index = module.LexicalIndex.open(folder)
    if index.granularity is not module.Granularity.WINDOW:
        raise SystemExit(f"error: {folder} holds {index.granularity.value} BM25; build it with the window default")
    rng = np.random.default_rng(2)
    picks = rng.integers(0, index.settings["documents"], size=args.queries)
    queries = _five_words([index.text(int(d)) for d in picks], rng)
    default = module.POSTINGS_PATH_SHARE
    paths = {"default": default, "every_window": 10**12}  # a share no postings count passes: bm25s's every window

    def search(query: str) -> np.ndarray:
        return np.argpartition(-index.scores(query), 100)[:100]

    for query in queries[:20]:
        module.POSTINGS_PATH_SHARE = 0
        fast = index.scores(query)
        module.POSTINGS_PATH_SHARE = paths["every_window"]
        if not np.array_equal(fast, index.scores(query)):
            raise SystemExit(f"error: the two paths disagree on {query!r}")
    indptr = index.retriever.scores["indptr"]
    postings = [sum(int(indptr[t + 1] - indptr[t]) for t in index.query_tokens(q)) for q in queries]
    load_before, runs = _load(), dict[str, list[dict[str, float]]]()
    for _, clients, path in itertools.product(range(args.repeats), (1, 8), paths):
        module.POSTINGS_PATH_SHARE = paths[path]
        runs.setdefault(f"{path}.clients_{clients}", []).append(_timed(search, queries, clients))
        print(path, clients, runs[f"{path}.clients_{clients}"][-1], flush=True)
    module.POSTINGS_PATH_SHARE = default
    latency = {key: {m: round(statistics.median(run[m] for run in timed), 2) for m in timed[0]}
               for key, timed in runs.items()}  # fmt: skip
    ratios = {f"clients_{c}": round(latency[f"every_window.clients_{c}"]["p50_ms"]
                                    / latency[f"default.clients_{c}"]["p50_ms"], 2) for c in (1, 8)}  # fmt: skip
    section = {"documents": index.settings["documents"], "windows": index.settings["units"], "queries": args.queries,
               "repeats": args.repeats, "postings_path_share": default, "latency": latency,
               "every_window_over_default_p50": ratios, "postings_per_query_p50": int(np.median(postings)),
               "through_postings": int(sum(p * default < index.settings["units"] for p in postings)),
               "load": [load_before, _load()]}  # fmt: skip
    print(json.dumps(section), flush=True)
    out = _section("window_query")
    _write("window_query", {**{k: v for k, v in out.items() if k != "environment"}, str(args.docs): section})
