"""Hybrid long-document search: dense windows, BM25 and their fusion, measured through the product's own path.

Stages:

- ``quality``: each data set is encoded with ``--long default`` (`lengthwise.encode`, resumable, under ``--work``)
  and indexed with its text (`lengthwise.LongIndex.build`, the defaults). Every arm is then scored from exact
  scores: the dense side's fp32 window scores of every document, BM25 over whole documents and over the index's
  windows, and their fusions (convex, z-score, min-max and DBSF at lexical weights 0.1 … 0.9, RRF, adaptive; the
  rules that depend on the candidates over the union of each side's exact 100 best, as
  `lengthwise.search.fusion.fuse_exact`; and both granularities together, which an index serves since session 47:
  ``index build --granularity both``).
  Data sets: QMSum (``data/qmsum``, dev and test queries, nDCG@10),
  20 Newsgroups subjects (``data/newsgroups``, dev and test halves, nDCG@10), 20 Newsgroups replies
  (``data/replies``: a reply's own words find the post it answers; dev and test halves by parent, nDCG@10), SciFact
  (the 450-document sample of ``encode/longdoc_scifact.py``, its test queries split in two halves by a seeded
  shuffle: dev and test, nDCG@10; skipped without ../shared/data), realistic passkey and needle (Acc@1 within each
  length group, LongEmbed's protocol; dev seed 1, test seed 0, lengths 256 … 32,768).
  The default is then chosen on the dev sets only by the rule written in docs/longdoc.md ("Issue 49") before
  the run (`choose`: within 1 point of the best on every corpus, then the best mean; leave-one-corpus-out on the
  test splits), and reported on the test sets; the chosen setting is also run through the index
  (`LongIndex.search`, ANN candidates) to give the recall of its top 10 against the exact fused scan. With another
  ``--model`` (all-mpnet-base-v2, the second model family at hand) the same table checks the default chosen on
  MiniLM: section ``quality_models``, its own work folder.
- ``engines``: bm25s against tantivy on the same documents: build time, peak memory, bytes on disk, query latency.
- ``scale``: dense against hybrid at ``--windows`` windows (20 per document; noisy copies of the real qmsum and
  SciFact window vectors that ``quality`` encoded, as search/index.py's scale corpus; essay text of 150–600 words per
  document with one unique code word): the lexical side's build time, its peak memory (a child process) and bytes per
  document, p50/p99 per query alone and with 8 client threads, and the recall of the fused top 10 against the exact
  fused scan. Dense and hybrid alternate in one run, so their ratio holds on a busy machine better than either figure.
  ``--fusion convex`` (the default here: convex at lexical weight 0.1, the default when the 1M and 10M figures were
  taken, under their keys) or ``default`` (the library's default fusion, `FusionSettings()`: z-score over each
  query's proposals; key ``{windows}-{granularity}-default``); ``--granularity window``, ``document`` or ``both``
  (both BM25 sides, as ``index build`` makes them by default, opened with `open_lexical`).
  The index records the model of the windows it copies (all-MiniLM-L6-v2) and their long-document settings, with a
  ``copied`` field saying what the vectors are, so it can be searched with text and served (serve/serve.py).
- ``scale-model``: record that model in a scale index built before it was recorded, in place (``index.json`` and the
  encoded manifest, each replaced atomically; nothing is rebuilt). The scale stage does it too when it reuses one.
- ``text-side``: the peak memory and time of `build_text_side` (the lexical side as `lengthwise index build` makes
  it, from the corpus file) over ``--docs`` scale documents written as a corpus.jsonl, in the index's order and
  shuffled (``--orders``), each in a fresh process; ``--label`` names the code measured (run it with an older
  checkout on ``PYTHONPATH`` for a before/after pair).
- ``window-query``: a window-granularity text-side build's BM25 query through `LexicalIndex.scores`' two paths
  (its terms' postings alone when they are few, bm25s's every-window scores else; and every window always, the
  code before the postings path), alternated in one run, 1 and 8 clients, after checking they agree to the bit.
- ``tuned``: `lengthwise index tune` on QMSum's and SciFact's own dev splits, then their test splits through the
  tuned index (what per-corpus tuning gives beside the default chosen across the four dev sets).
- ``duplicated``: ``--docs`` near-copies (the same notice first and last, the same essay paragraph repeated 1 to 6
  times, one sentence of their own), a query each: dense, lexical and hybrid search through the default index
  against their exact scans, with the share of window vectors that are distinct.
- ``aggregations``: dev sets only, other ways to score a document from its windows on the dense side (the best less
  a share of the mean window, the mean of the best two), alone and fused with window BM25 (an exploration: nothing
  is adopted from it).

    nice -n 5 python -m benchmarks.search.hybrid quality --threads 1
    nice -n 5 python -m benchmarks.search.hybrid quality --threads 2 --model DIR/all-mpnet-base-v2 --sets qmsum,scifact
    nice -n 5 python -m benchmarks.search.hybrid engines --docs 100000
    nice -n 5 python -m benchmarks.search.hybrid scale --windows 1000000
    nice -n 5 python -m benchmarks.search.hybrid scale --windows 1000000 --granularity both --fusion default
    nice -n 5 python -m benchmarks.search.hybrid scale-model --windows 1000000
    nice -n 5 python -m benchmarks.search.hybrid text-side --docs 50000 --label after
    nice -n 5 python -m benchmarks.search.hybrid window-query --docs 335000
    nice -n 5 python -m benchmarks.search.hybrid tuned
    nice -n 5 python -m benchmarks.search.hybrid duplicated --docs 200
    nice -n 5 python -m benchmarks.search.hybrid aggregations --dev-per-length 20
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks._measure import disk_bytes
from lengthwise.core.fusion import TUNED_WEIGHTS

ROOT = Path(__file__).resolve().parents[2]
MODULE = "benchmarks.search.hybrid"  # run as python -m MODULE, from the repository root
RESULTS = ROOT / "docs" / "results" / "bench_hybrid.json"
WEIGHTS = TUNED_WEIGHTS  # the quality stage tries the weights `index tune` tries
LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _write(section: str, payload: dict[str, Any]) -> None:
    from lengthwise.core.results import environment, write_json_atomic

    out = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    out[section] = {**payload, "environment": environment()}
    write_json_atomic(RESULTS, out)


# --- data sets ------------------------------------------------------------------------------------------------------


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


# --- one data set through the product --------------------------------------------------------------------------------


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


WEIGHTED = ("convex", "zscore", "minmax", "dbsf")  # the fusions with a lexical weight (each at every one of WEIGHTS)
UNWEIGHTED = ("rrf", "adaptive")


def arm_settings(arm: str) -> tuple[str, Any]:
    """The lexical granularity and `FusionSettings` of a fusion arm named as `_arms` names them
    (``convex-window-0.1``, ``rrf-document``, ``adaptive-window`` …)."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.types import FusionSettings

    fusion, granularity, *weight = arm.split("-")
    return granularity, FusionSettings(Fusion(fusion), float(weight[0]) if weight else 0.5)


def _fused(dense: np.ndarray, lexical: np.ndarray, settings: Any) -> np.ndarray:
    """(Q, n) fused scores as a search with exact proposals ranks them (`lengthwise.search.fusion.fuse_exact`, the
    default depth)."""
    from lengthwise.search.fusion import fuse_exact
    from lengthwise.search.types import DEPTH

    return np.stack([fuse_exact(d, x, settings, DEPTH) for d, x in zip(dense, lexical, strict=True)])


def _both(matrices: dict[str, np.ndarray], weight: float | None) -> np.ndarray:
    """Dense, document BM25 and window BM25 fused: z-scores with the lexical `weight` shared equally by the two
    granularities, the adaptive weights (None), or RRF (weight −1), over the union of each side's exact `DEPTH` best.
    An index of granularity ``both`` serves the same fusion (`lengthwise.search.fusion.fuse_exact` with both sides;
    the scores agree, tests/test_bench_hybrid_stages.py)."""
    from lengthwise.core.fusion import fuse_normalised
    from lengthwise.search.fusion import RRF_K, exact_candidates
    from lengthwise.search.types import DEPTH

    out = np.full(matrices["dense"].shape, -np.inf)
    for q, (d, doc, win) in enumerate(zip(matrices["dense"], matrices["document"], matrices["window"], strict=True)):
        chosen = np.union1d(exact_candidates(d, doc, DEPTH), exact_candidates(d, win, DEPTH))
        sides = [d[chosen], doc[chosen], win[chosen]]
        if weight is not None and weight < 0:
            ranks = [np.argsort(np.argsort(-side, kind="stable"), kind="stable") + 1 for side in sides]
            out[q, chosen] = sum(np.where((side > 0) | (n == 0), 1.0 / (RRF_K + r), 0.0)
                                 for n, (side, r) in enumerate(zip(sides, ranks, strict=True)))  # fmt: skip
        else:
            weights = None if weight is None else [1.0 - weight, weight / 2, weight / 2]
            out[q, chosen] = fuse_normalised(sides, weights, "zscore")
    return out


def _arms(matrices: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every arm's (Q, n) ranking scores: each side alone, every fusion an index serves over each granularity of
    BM25, and the three-sided fusions of both granularities (``*-both``)."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.types import FusionSettings

    arms = {"dense": matrices["dense"], "bm25-document": matrices["document"], "bm25-window": matrices["window"]}
    for granularity in ("document", "window"):
        dense, lexical = matrices["dense"], matrices[granularity]
        for fusion in UNWEIGHTED:
            arms[f"{fusion}-{granularity}"] = _fused(dense, lexical, FusionSettings(Fusion(fusion)))
        for fusion in WEIGHTED:
            for weight in WEIGHTS:
                settings = FusionSettings(Fusion(fusion), weight)
                arms[f"{fusion}-{granularity}-{weight}"] = _fused(dense, lexical, settings)
    arms["rrf-both"], arms["adaptive-both"] = _both(matrices, -1.0), _both(matrices, None)
    for weight in WEIGHTS:
        arms[f"zscore-both-{weight}"] = _both(matrices, weight)
    return arms


def _ndcg(scores: np.ndarray, doc_ids: list[str], split: dict[str, Any]) -> float:
    from lengthwise.evaluation.config import RetrievalConfig
    from lengthwise.evaluation.retrieval import trec_scores

    run = {}
    for qid, row in zip(split["ids"], scores, strict=True):
        top = np.argsort(-row, kind="stable")[:100]
        run[qid] = {doc_ids[j]: float(row[j]) for j in top if np.isfinite(row[j])}  # −inf: not proposed
    per_query = trec_scores(split["qrels"], run, RetrievalConfig())
    return round(100 * sum(row["ndcg@10"] for row in per_query.values()) / len(split["ids"]), 2)


def _acc1(scores: np.ndarray, data: Any) -> dict[str, Any]:
    """Acc@1 within each length group (query i asks for document i), ties shared: the mean and by length."""
    groups = np.asarray([item.group for item in data.items])
    hits = np.zeros(len(groups))
    for group in np.unique(groups):
        members = np.nonzero(groups == group)[0]
        block = scores[np.ix_(members, members)]
        own = block[np.arange(len(members)), np.arange(len(members))]
        higher, tied = (block > own[:, None]).sum(1), (block == own[:, None]).sum(1)
        hits[members] = np.where(higher == 0, 1.0 / tied, 0.0)
    by_length = {int(g): round(100 * float(hits[groups == g].mean()), 2) for g in np.unique(groups)}
    return {"mean": round(float(np.mean(list(by_length.values()))), 2), "by_length": by_length}


def stage_quality(args: argparse.Namespace) -> None:
    """Every arm on every set (`args.sets`) from exact scores. With the default model the table is the one the
    default was chosen from (section ``quality``); with another `--model` it is a check of that choice on a second
    model family (section ``quality_models``, keyed by the model's folder name; its own work folder under
    `--work`): the rule applied to the dev sets that model ran, and where the chosen default stands."""
    from lengthwise.core.models import load_plain_model

    torch.set_num_threads(args.threads)
    other = args.model != DEFAULT_MODEL
    if other:
        args = argparse.Namespace(**{**vars(args), "work": args.work / f"model-{Path(args.model).name}"})
    started, load_before = time.perf_counter(), _load()
    table: dict[str, dict[str, Any]] = {}
    for name, entry in _retrieval_sets(args).items():
        if name not in args.sets:
            continue
        index = _indexed(name, entry["ids"], entry["texts"], args, entry.get("corpus"))
        for split, queries in entry["splits"].items():
            arms = _arms(_score_matrices(index, queries["texts"], args))
            table[f"{name}-{split}"] = {arm: _ndcg(s, index.doc_ids, queries) for arm, s in arms.items()}
            print(f"{name}-{split}: " + _summary(table[f"{name}-{split}"]), flush=True)
    tokenizer = load_plain_model(args.model).tokenizer
    for name, entry in _synthetic_sets(args, tokenizer).items():
        if name.split("-")[0] not in args.sets:
            continue
        index = _indexed(name, entry["ids"], entry["texts"], args)
        assert index.doc_ids == entry["ids"]
        arms = _arms(_score_matrices(index, [item.query for item in entry["data"].items], args))
        results = {arm: _acc1(s, entry["data"]) for arm, s in arms.items()}
        table[name] = {arm: r["mean"] for arm, r in results.items()}
        table[name + ":by_length"] = {arm: r["by_length"] for arm, r in results.items()}
        print(f"{name}: " + _summary(table[name]), flush=True)
    run = {"seconds": round(time.perf_counter() - started), "load": [load_before, _load()], "lengths": LENGTHS,
           "per_length": {"dev": args.dev_per_length, "test": args.per_length}}  # fmt: skip
    if other:
        _write_model_check(args.model, table, run)
        return
    earlier = json.loads(RESULTS.read_text()).get("quality", {}) if RESULTS.is_file() else {}
    ran = sorted({name.split(":")[0].rsplit("-", 1)[0] for name in table})
    table = {**earlier.get("table", {}), **table}  # a run of some sets keeps the others' rows
    _write("quality", {"table": table, "dev_sets": DEV_SETS, "rule": RULE, "choice": choose(table),
                       **_run_records(earlier, run, ran)})  # fmt: skip


RUN_FIELDS = ("seconds", "load", "lengths", "per_length")  # what a quality run records of itself


def _run_records(earlier: dict[str, Any], run: dict[str, Any], ran: list[str]) -> dict[str, Any]:
    """The run fields of section ``quality``: at the top, those of the last run of every set in `SETS` (a run of
    some sets keeps them: they describe the rows it did not redo); under ``runs``, the run that made each corpus's
    rows (`ran`: the corpora this run scored), earlier corpora's kept."""
    kept = {k: earlier[k] for k in RUN_FIELDS if k in earlier}
    top = run if set(ran) >= set(SETS) or not kept else kept
    return {**top, "runs": {**earlier.get("runs", {}), **{name: {**run, "sets": ran} for name in ran}}}


def _write_model_check(model: str, table: dict[str, dict[str, Any]], run: dict[str, Any]) -> None:
    """Section ``quality_models``: another model's table (earlier sets of the same model kept), the rule applied to
    its dev sets, and the default chosen with the default model against that model's best arm on each set."""
    results = json.loads(RESULTS.read_text())  # the default model's table is there: the check compares with it
    out, name = results.get("quality_models", {}), Path(model).name
    arms = set(next(iter(table.values())))  # an earlier run's rows count only when they hold the same arms
    kept = {s: row for s, row in out.get(name, {}).get("table", {}).items() if set(row) == arms}
    table = {**kept, **table}
    default = choose(results["quality"]["table"])["chosen"]
    chosen = choose(table)
    sets = [s for s in table if ":" not in s]
    default_row = {s: {"default": table[s][default], "best": max(table[s].values()),
                       "best_arm": max(table[s], key=table[s].__getitem__), "dense": table[s]["dense"],
                       "bm25_best": max(table[s]["bm25-document"], table[s]["bm25-window"])} for s in sets}  # fmt: skip
    check = {"model": model, "table": table, "default": default, "chosen_here": chosen, "default_by_set": default_row,
             **run}  # fmt: skip
    print(json.dumps({"default": default, "chosen_here": chosen["chosen"], "by_set": default_row}, indent=1))
    _write("quality_models", {**{k: v for k, v in out.items() if k != "environment"}, name: check})


DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
SETS = ("qmsum", "scifact", "newsgroups", "replies", "passkey", "needle")  # the corpora of the choice (docs/longdoc.md)
DEV_SETS = tuple(f"{name}-dev" for name in SETS)
RULE = ("issue 49, written in docs/longdoc.md before the run: among the fusions an index serves (one lexical "
        "granularity), an arm's regret on a corpus is the best such arm's dev score there less its own; the admissible "
        "arms lose at most 1 point on every corpus's dev split, and the default is the admissible arm with the highest "
        "dev mean (none admissible: the smallest worst regret, then the highest mean). Leave-one-corpus-out: the same "
        "rule on the other corpora's dev splits must choose an arm within 1 point of the best on the held-out "
        "corpus's test split. Amended in session 47, after the sixth corpus (20 Newsgroups replies) was added and "
        "before the all-mpnet-base-v2 check: the index now also serves both granularities of BM25 together (index "
        "build --granularity both), so the *-both arms are fusions an index serves and enter the choice")  # fmt: skip
TOLERANCE = 1.0  # points of nDCG@10 / Acc@1 a rule may lose to the best on any corpus


def _summary(row: dict[str, float]) -> str:
    best = max((a for a in row if a.split("-")[0] in WEIGHTED + UNWEIGHTED), key=row.__getitem__)
    return (f"dense {row['dense']}, bm25 doc {row['bm25-document']} / window {row['bm25-window']}, "
            f"best fusion {best} {row[best]}")  # fmt: skip


def served(table_row: dict[str, float]) -> list[str]:
    """The arms a default may be: the fusions an index serves (not the sides alone), over one lexical granularity
    or both (``*-both``, served since session 47)."""
    return [arm for arm in table_row if arm.split("-")[0] in WEIGHTED + UNWEIGHTED]


def _pick(table: dict[str, dict[str, float]], corpora: list[str]) -> dict[str, Any]:
    """The rule on the dev splits of `corpora`: regrets, the admissible arms, the chosen one."""
    arms = served(table[f"{corpora[0]}-dev"])
    dev = {c: table[f"{c}-dev"] for c in corpora}
    worst = {a: max(max(dev[c][b] for b in arms) - dev[c][a] for c in corpora) for a in arms}
    means = {a: float(np.mean([dev[c][a] for c in corpora])) for a in arms}
    admissible = [a for a in arms if worst[a] <= TOLERANCE + 1e-9]
    order = sorted(admissible or arms, key=lambda a: (0.0 if admissible else round(worst[a], 6), -round(means[a], 6),
                                                      a))  # fmt: skip
    return {"worst_regret": {a: round(w, 2) for a, w in worst.items()},
            "means": {a: round(m, 2) for a, m in means.items()}, "admissible": admissible,
            "chosen": order[0]}  # fmt: skip


def choose(table: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The rule of docs/longdoc.md (`RULE`) applied to the dev sets present, and its leave-one-corpus-out check on
    the test splits: for each corpus held out, the arm the rule picks from the others and its loss there."""
    corpora = [s.removesuffix("-dev") for s in DEV_SETS if s in table]
    out = {"dev_sets": [f"{c}-dev" for c in corpora], **_pick(table, corpora), "held_out": {}}
    for held in [c for c in corpora if f"{c}-test" in table] if len(corpora) > 1 else []:
        pick = _pick(table, [c for c in corpora if c != held])["chosen"]
        test = table[f"{held}-test"]
        best = max(served(test), key=lambda a: (test[a], a))
        out["held_out"][held] = {"chosen": pick, "test": test[pick], "best": best, "best_test": test[best],
                                 "loss": round(test[best] - test[pick], 2)}  # fmt: skip
    return out


AGGREGATIONS = ("max", "max-0.25mean", "max-0.5mean", "top2-mean")  # a document's dense score from its windows'


def _aggregate(cosines: np.ndarray, offsets: np.ndarray, how: str) -> np.ndarray:
    """(Q, n) document scores from (Q, W) window cosines: the best window (the index's own scoring), the best less a
    share of the document's mean window, or the mean of its best two."""
    out = []
    for a, b in itertools.pairwise(offsets):
        block = cosines[:, a:b]
        if how == "top2-mean":
            out.append(np.sort(block, axis=1)[:, -2:].mean(axis=1))
        else:
            share = float(how.split("-")[1].removesuffix("mean")) if how != "max" else 0.0
            out.append(block.max(axis=1) - share * block.mean(axis=1))
    return np.stack(out, axis=1).astype(np.float64)


def _acc1_mean(scores: np.ndarray, data: Any) -> float:
    return float(_acc1(scores, data)["mean"])


def stage_aggregations(args: argparse.Namespace) -> None:
    """Dev sets only: other ways to score a document from its windows' cosines on the dense side (`AGGREGATIONS`),
    alone and fused with window BM25 at the default weight and at 0.2, on the quality stage's indexes (QMSum and
    SciFact under ``--work``, passkey and needle under ``--synthetic-work``). An exploration: nothing here is
    adopted, so no test split is scored."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.core.models import load_plain_model
    from lengthwise.search.fusion import fuse
    from lengthwise.search.lexical.bm25 import LexicalIndex
    from lengthwise.search.types import FusionSettings

    torch.set_num_threads(args.threads)
    import lengthwise as lw

    sets: dict[str, tuple[Any, list[str], Path, Any]] = {}  # name → (index, queries, window BM25 folder, judge)
    for name, entry in _retrieval_sets(args).items():
        index, split = lw.LongIndex.open(args.work / name / "index"), entry["splits"]["dev"]
        judge = functools.partial(_ndcg, doc_ids=index.doc_ids, split=split)
        sets[f"{name}-dev"] = (index, split["texts"], args.work / name / "lexical-window", judge)
    tokenizer = load_plain_model(args.model).tokenizer
    for name, entry in _synthetic_sets(args, tokenizer).items():
        if name.endswith("-dev"):
            index = lw.LongIndex.open(args.synthetic_work / name / "index")
            judge = functools.partial(_acc1_mean, data=entry["data"])
            queries = [item.query for item in entry["data"].items]
            sets[name] = (index, queries, args.synthetic_work / name / "lexical-window", judge)
    table: dict[str, dict[str, float]] = {}
    for name, (index, queries, folder, judge) in sets.items():
        vectors = torch.nn.functional.normalize(torch.as_tensor(np.asarray(index.embed_queries(queries))), dim=-1)
        cosines = vectors.numpy() @ np.asarray(index.vectors, dtype=np.float32).T
        bm25 = LexicalIndex.open(folder)
        lexical = np.stack([bm25.scores(q) for q in queries]).astype(np.float64)
        for how in AGGREGATIONS:
            dense = _aggregate(cosines, np.asarray(index.offsets), how)
            table.setdefault(f"{how} dense", {})[name] = judge(dense)
            for weight in (0.1, 0.2):
                settings = FusionSettings(Fusion.CONVEX, weight)
                fused = np.stack([fuse(d, x, settings) for d, x in zip(dense, lexical, strict=True)])
                table.setdefault(f"{how} convex-window-{weight}", {})[name] = judge(fused)
        print(name, {arm: row[name] for arm, row in table.items()}, flush=True)
    for row in table.values():
        row["dev mean"] = round(float(np.mean([row[name] for name in sets])), 2)
    _write("aggregations", {"table": table, "dev_sets": list(sets), "per_length": args.dev_per_length,
                            "load": _load()})  # fmt: skip


# --- engines ---------------------------------------------------------------------------------------------------------


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


def _engine_run(engine: str, docs: int, work: Path) -> dict[str, Any]:
    texts = _scale_texts(docs)
    rng = random.Random(1)
    queries = [" ".join(rng.sample(texts[rng.randrange(docs)].split(), 6)) for _ in range(200)]
    folder = work / f"engine-{engine}"
    shutil.rmtree(folder, ignore_errors=True)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
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
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"build_s": round(built, 1), "bytes_per_doc": round(size / docs, 1), "peak_rss_mb": round(peak / 1024),
            "rss_before_mb": round(base / 1024), "p50_ms": round(statistics.median(times), 2),
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


# --- scale -----------------------------------------------------------------------------------------------------------

PER_DOC = 20  # windows per document, as search/index.py's scale corpus
COPIED_FROM = ("qmsum", "scifact")  # the encoded folders of the quality stage whose windows the scale corpus copies
NOISE = 0.02  # σ of the Gaussian noise added to each copied window (then renormalised)
TEXT_SIDE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the text-side stage cuts windows with its tokenizer
SCALE_MODEL_UNKNOWN = "copies of real windows"  # what scale indexes built before the model was recorded hold


def _scale_source(work: Path) -> np.ndarray:
    """Real window vectors to copy from: the qmsum and SciFact windows this benchmark's `quality` stage encoded."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.longdoc.storage.store import read_embeddings

    parts = []
    for name in COPIED_FROM:
        folder = work / name / "encoded"
        if not (folder / "manifest.json").is_file():
            raise SystemExit(f"error: {folder} is missing; run the quality stage first (it encodes {name})")
        _, read = read_embeddings(folder)
        parts.append(read.vectors if isinstance(read, MultiVectors) else read)
    return np.concatenate(parts).astype(np.float32)


def _scale_settings(work: Path) -> dict[str, Any]:
    """The encode settings the scale corpus records: the model, long-document settings and precision of the windows
    it copies (the qmsum and SciFact folders must agree on them), and what the vectors really are (``copied``): a
    text query embedded by that model searches them as it would the real windows, the scores are not an encoding of
    any text, and the lexical side's essays are unrelated to them."""
    from lengthwise.longdoc.storage.store import read_manifest

    made = {}
    for name in COPIED_FROM:
        folder = work / name / "encoded"
        if not (folder / "manifest.json").is_file():
            raise SystemExit(f"error: {folder} is missing; run the quality stage first (it encodes {name})")
        settings = read_manifest(folder)["settings"]
        made[name] = {key: settings.get(key, "fp32" if key == "precision" else None)
                      for key in ("model", "long", "precision")}  # fmt: skip
    first, *others = made.values()
    if any(other != first for other in others):
        raise SystemExit(f"error: {', '.join(COPIED_FROM)} were encoded with other settings: {made}")
    copied = {
        "vectors": "noisy copies of real window vectors, not encodings of the indexed documents' text",
        "from": [f"{name} (the quality stage's encoded windows)" for name in COPIED_FROM],
        "per_document": PER_DOC,
        "noise_sigma": NOISE,
        "seed": 0,
        "text": "the lexical side's essays (150-600 words and a code word each) are unrelated to the vectors",
    }
    return {**first, "copied": copied}


def _scale_model(settings: dict[str, Any], dim: int) -> dict[str, Any]:
    """The ``model`` record of an index (`LongIndex.build`'s): the recorded model loaded as the service loads it
    (`lengthwise.load_model`), its dimension checked against the vectors', its weights fingerprinted."""
    import lengthwise as lw
    from lengthwise.core.models import model_fingerprint

    model = lw.load_model(settings["model"], precision=settings["precision"])
    found = len(model.encode(["a"], convert_to_numpy=True)[0])
    if found != dim:
        raise SystemExit(f"error: {settings['model']} embeds in {found} dimensions, the scale vectors have {dim}")
    name = str(Path(settings["model"]).resolve()) if Path(settings["model"]).is_dir() else settings["model"]
    return {"name": name, "weights_sha256_16": model_fingerprint(model, name)["weights_sha256_16"]}


def record_scale_model(windows: int, work: Path) -> str:
    """Record the real model in a scale index built before it was recorded (``"model": "copies of real windows"``):
    its ``index.json`` and its encoded folder's ``manifest.json`` get `_scale_settings` and the model's fingerprint,
    each file replaced atomically; the vectors, engine and lexical side are untouched. The index can then be served
    and searched with text (`lengthwise serve`, `LongIndex.search`). Returns what was done; run again, nothing."""
    from lengthwise.core.results import write_json_atomic

    folder = work / f"scale-{windows}"
    index_file, manifest_file = folder / "index" / "index.json", folder / "encoded" / "manifest.json"
    if not index_file.is_file():
        raise SystemExit(f"error: {index_file} is missing; build the scale index with the scale stage")
    index = json.loads(index_file.read_text(encoding="utf-8"))
    settings = _scale_settings(work)
    if index.get("encode_settings") == settings and isinstance(index.get("model"), dict):
        return f"{index_file}: records {index['model']['name']} already"
    if index.get("encode_settings", {}).get("model") != SCALE_MODEL_UNKNOWN:
        raise SystemExit(f"error: {index_file} records the model {index.get('encode_settings', {}).get('model')!r}, "
                         "not the scale corpus's placeholder; it was not written by this stage")  # fmt: skip
    if Path(index["encoded"]).resolve() != (folder / "encoded").resolve():
        raise SystemExit(f"error: {index_file} was built from {index['encoded']}, not {folder / 'encoded'}")
    model = _scale_model(settings, int(index["dim"]))
    if manifest_file.is_file():  # the shards' own record, for a later build from them
        manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
        write_json_atomic(manifest_file, {**manifest, "settings": settings})
    write_json_atomic(index_file, {**index, "encode_settings": settings, "model": model})
    return f"{index_file}: now records {model['name']} ({model['weights_sha256_16']}) and its long-document settings"


def _scale_index(windows: int, work: Path) -> Path:
    """A dense index of `windows` window vectors, 20 per document, with the USearch int8 default, reused when built
    (and given the model's record, `record_scale_model`, when built before it was recorded).

    The vectors are the real qmsum and SciFact windows (all-MiniLM-L6-v2, `--long default`) drawn at random with
    small seeded Gaussian noise (σ = 0.02, renormalised), as search/index.py's scale corpus: isotropic random vectors
    have no neighbourhood structure, and HNSW builds over them far more slowly than over sentence embeddings. The
    index records that model and its long-document settings (`_scale_settings`, with ``copied`` saying what the
    vectors are), so text queries are embedded as the copied windows were and the index can be served."""
    from lengthwise.core.encoder import MultiVectors
    from lengthwise.facade import LongIndex
    from lengthwise.longdoc.storage.store import EmbeddingStore

    out = work / f"scale-{windows}" / "index"
    if (out / "index.json").is_file():
        print(record_scale_model(windows, work), flush=True)
        return out
    shards = work / f"scale-{windows}" / "encoded"
    source = _scale_source(work)
    settings = _scale_settings(work)
    model = _scale_model(settings, source.shape[1])  # before anything is written
    store = EmbeddingStore(shards, settings)
    done, _ = store.repair()  # whole shards are kept: a killed run writes only the blocks it had not written
    rng = np.random.default_rng(0)
    for number, first in enumerate(range(0, windows, 100_000)):
        docs = min(100_000, windows - first) // PER_DOC
        picked = source[rng.integers(0, len(source), size=docs * PER_DOC)]  # drawn for every block: the seeded
        noise = rng.normal(0, NOISE, size=picked.shape)  # stream, and so each block, is the same on every run
        ids = [f"s{first // PER_DOC + i}" for i in range(docs)]
        if ids[-1] in done:
            continue
        vectors = picked + noise
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
        store.write("w0-", ids, MultiVectors(vectors, np.arange(docs + 1, dtype=np.int64) * PER_DOC), number=number)
    LongIndex.build_windows(shards, out, extra={"model": model})  # resumes its staged build from its last save
    return out


def _lexical_build(index: Path, docs: int, granularity: str = "window") -> None:
    """The lexical side of the scale index, BM25 over its windows, whole documents or both, in `_lexical_folder` (run
    in its own process: its peak memory is the build's)."""
    from lengthwise.search.lexical.bm25 import LexicalIndex

    texts = _scale_texts(docs)
    spans = []
    for text in texts:  # 20 even character spans per document
        edges = np.linspace(0, len(text), PER_DOC + 1).astype(np.int64)
        spans.append(np.stack([edges[:-1], edges[1:]], axis=1))
    built = LexicalIndex.build(texts, spans, _lexical_folder(index, granularity), granularity=granularity)
    if granularity == "window":  # the index's own lexical side: it belongs to the generation served
        built.record(generation=json.loads((index / "index.json").read_text(encoding="utf-8"))["generation"])


def _lexical_folder(index: Path, granularity: str) -> Path:
    """Where the scale stage keeps its lexical side: ``lexical`` in the generation served (the index's own, BM25 over
    the windows), or ``lexical-{granularity}`` beside it in the index folder: ``lexical-document`` (whole documents,
    the granularity the docs advise above a few million windows) or ``lexical-both`` (the window side with whole
    documents in ``document/`` inside it, `Granularity.BOTH`: an index's default); the benchmark opens these
    explicitly (`lengthwise.search.lexical.bm25.open_lexical`)."""
    from lengthwise.search.local.files import served_files

    return served_files(index) / "lexical" if granularity == "window" else index / f"lexical-{granularity}"


def _lexical_complete(folder: Path, granularity: str) -> bool:
    """Whether the lexical side in `folder` was built to the end (both granularities: its whole-document side too,
    built after the window side)."""
    from lengthwise.search.lexical.bm25 import DOCUMENT_SIDE, SETTINGS_FILE

    inner = folder / DOCUMENT_SIDE if granularity == "both" else folder
    return (folder / SETTINGS_FILE).is_file() and (inner / SETTINGS_FILE).is_file()


def _has_lexical(index: Path) -> bool:
    """Whether the index folder `index` exists and serves a lexical side."""
    from lengthwise.longdoc.config import LongDocError

    try:
        return (_lexical_folder(index, "window") / "lexical.json").is_file()
    except LongDocError:  # no index there
        return False


def _scale_key(windows: int, granularity: str, fusion: str = "convex") -> str:
    """The scale section's key of a run: the window count, suffixed with the granularity when it is not ``window``
    (convex fusion, the keys of the figures taken before issue 49), or with the granularity and ``default`` for the
    library's default fusion (`scale_fusion`)."""
    if fusion != "convex":
        return f"{windows}-{granularity}-{fusion}"
    return str(windows) if granularity == "window" else f"{windows}-{granularity}-granularity"


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
        code = (f"import sys, json; from benchmarks.search import hybrid as b; "
                f"from pathlib import Path; print(json.dumps(b._text_side_build(Path({str(corpus)!r}), "
                f"{args.docs})))")  # fmt: skip
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        rows[order] = {**json.loads(done.stdout.strip().splitlines()[-1]), "load": [load_before, _load()],
                       "corpus_mb": round(corpus.stat().st_size / 1e6)}  # fmt: skip
        print(order, rows[order], flush=True)
    if args.queries and "same" in args.orders:
        rows["lexical_query"] = _lexical_latency(args.work / f"text-side-{args.docs}" / "index-corpus-same", args)
    import lengthwise

    out = json.loads(RESULTS.read_text()).get("text_side", {}) if RESULTS.is_file() else {}
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
    out = json.loads(RESULTS.read_text()).get("window_query", {}) if RESULTS.is_file() else {}
    _write("window_query", {**{k: v for k, v in out.items() if k != "environment"}, str(args.docs): section})


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


def stage_scale(args: argparse.Namespace) -> None:
    """Dense against hybrid at `args.windows` windows: the lexical side's build time, memory and bytes per document,
    query latency alone and with 8 clients, and the recall of the fused top 10 against the exact fused scan; the
    lexical side of `args.granularity`, fused by `args.fusion` (`scale_fusion`)."""
    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.lexical.bm25 import open_lexical
    from lengthwise.search.searcher import Searcher

    fusion, docs = getattr(args, "fusion", "convex"), args.windows // PER_DOC
    key = _scale_key(args.windows, args.granularity, fusion)
    if getattr(args, "label", "current") != "current":  # a re-run recorded beside the figures under the plain key
        key = f"{key}-{args.label}"
    folder, lexical_folder, builds = _scale_builds(args, key)
    if args.build_only:  # the builds' figures now; a later run reuses both sides and keeps them
        out = json.loads(RESULTS.read_text()).get("scale", {}) if RESULTS.is_file() else {}
        _write("scale", {**{k: v for k, v in out.items() if k != "environment"}, key: builds})
        print(builds, flush=True)
        return
    load_before = _load()
    index, lexical = LongIndex.open(folder), open_lexical(lexical_folder)
    vectors, query_texts = _scale_queries(index, docs, args.queries)
    settings = scale_fusion(fusion)
    searcher = Searcher(index.windows, lexical, index.queries, WindowScoring(), "no text")
    asked = list(range(args.queries))
    runs: dict[tuple[str, int], list[dict[str, float]]] = {}
    for _, clients, mode in itertools.product(range(args.repeats), (1, 8), (Mode.DENSE, Mode.HYBRID)):  # alternated

        def search(n: int, mode: Mode = mode) -> Any:
            return searcher.rank(vectors[n : n + 1], query_texts[n : n + 1], 10, mode, settings)

        runs.setdefault((mode.value, clients), []).append(_timed(search, asked, clients))
        print(mode.value, clients, runs[mode.value, clients][-1], flush=True)
    rows: dict[str, Any] = {}  # per mode and client count: the median over the repeats of each figure
    for (mode_name, clients), timed in runs.items():
        rows.setdefault(mode_name, {})[f"clients_{clients}"] = {
            key: round(statistics.median(run[key] for run in timed), 2) for key in timed[0]
        }
    ratios = {
        f"hybrid_over_dense_p50_clients_{c}": round(
            rows["hybrid"][f"clients_{c}"]["p50_ms"] / rows["dense"][f"clients_{c}"]["p50_ms"], 2
        )
        for c in (1, 8)
    }
    checked = asked[: args.recall_queries]
    exact = _exact_fused_batched(searcher, settings, vectors[checked], [query_texts[n] for n in checked], 10)
    recall = _against_exact(searcher, settings, vectors, query_texts, exact)
    size, bm25 = disk_bytes(lexical_folder), sum(disk_bytes(p) for p in lexical_folder.rglob("bm25") if p.is_dir())
    section = {**builds,
               "lexical_bytes_per_doc": round(size / docs), "bm25_bytes_per_doc": round(bm25 / docs),
               "queries": args.queries, "repeats": args.repeats, "latency": rows, **ratios,
               "recall_at_10_vs_exact_fused": recall["recall_at_10_vs_exact_fused"],
               "recall_queries": len(checked), "load": [load_before, _load()]}  # fmt: skip
    if fusion != "convex":  # the sections recorded before issue 49 keep their fields
        section = {**section, "fusion": settings.to_dict(), "first_hit_agrees": recall["first_hit_agrees"]}
    print(section, flush=True)
    out = json.loads(RESULTS.read_text()).get("scale", {}) if RESULTS.is_file() else {}
    _write("scale", {**{k: v for k, v in out.items() if k != "environment"}, key: section})


def _scale_builds(args: argparse.Namespace, key: str) -> tuple[Path, Path, dict[str, Any]]:
    """The scale index and its lexical side of `args.granularity` (each built unless there), and the builds' figures
    for the section `key`: a side reused keeps the figures of the run that built it (this key's, else those of the
    other keys of the same index and granularity)."""
    load_before, docs = _load(), args.windows // PER_DOC
    earlier = json.loads(RESULTS.read_text()).get("scale", {}) if RESULTS.is_file() else {}
    same_index = [earlier.get(k, {}) for k in (key, str(args.windows))]
    same_side = [earlier.get(k, {}) for k in (key, _scale_key(args.windows, args.granularity))]
    reused = (args.work / f"scale-{args.windows}" / "index" / "index.json").is_file()
    started = time.perf_counter()
    folder = _scale_index(args.windows, args.work)
    dense_built: float | None = time.perf_counter() - started
    if reused:  # the dense build's time is the run's that built it (kept), not this reuse's
        dense_built = next((e["dense_build_s"] for e in same_index if e.get("dense_build_s") is not None), None)
    started = time.perf_counter()
    lexical_folder = _lexical_folder(folder, args.granularity)
    lexical_reused = _lexical_complete(lexical_folder, args.granularity)
    if not lexical_reused:
        code = f"import sys; from benchmarks.search import hybrid as b; " \
               f"from pathlib import Path; " \
               f"b._lexical_build(Path({str(folder)!r}), {docs}, {args.granularity!r})"  # fmt: skip
        # the child's own peak (kB): VmHWM, not ru_maxrss, which also counts this process's memory at the fork
        peak = "; print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))"
        done = subprocess.run([sys.executable, "-c", code + peak], capture_output=True, text=True, check=True)
        peak_mb: int | None = round(int(done.stdout.strip().splitlines()[-1]) / 1024)
        lexical_built: float | None = time.perf_counter() - started
    else:  # as for the dense side: the figures of the run that built it
        built = next((e for e in same_side if e.get("lexical_build_s") is not None), {})
        peak_mb, lexical_built = built.get("lexical_peak_rss_mb"), built.get("lexical_build_s")
    builds = {"windows": args.windows, "documents": docs, "granularity": args.granularity,
              "dense_build_s": round(dense_built) if dense_built is not None else None, "dense_reused": reused,
              "lexical_build_s": round(lexical_built) if lexical_built is not None else None,
              "lexical_reused": lexical_reused, "lexical_peak_rss_mb": peak_mb,
              "build_load": next((e.get("build_load") for e in same_side if e.get("build_load")), None)
              if reused and lexical_reused else [load_before, _load()]}  # fmt: skip
    return folder, lexical_folder, builds


def scale_fusion(fusion: str = "convex") -> Any:
    """The fusion the scale stages measure (``--fusion``) and their batched exact scan reproduces
    (`_exact_fused_batched`). ``convex``: convex at lexical weight 0.1 over window BM25, the default when the 1M and
    10M figures were taken (their keys: the window count, ``-document-granularity``); every document's fused score
    is its own, so the exact scan fuses the whole corpus. ``default``: the library's default since issue 49,
    `FusionSettings()` (z-score at lexical weight 0.3 over each query's proposals; with ``--granularity both`` the
    index default, dense + document BM25 + window BM25 at 0.7 / 0.15 / 0.15); it normalises over the proposed
    documents, so the exact scan fuses the union of each side's exact best (`lengthwise.search.fusion.fuse_exact`, as
    `lengthwise.search.exact.exact_ranked`), not the whole corpus."""
    from lengthwise.core.fusion import Fusion
    from lengthwise.search.types import FusionSettings

    if fusion == "default":
        return FusionSettings()
    if fusion != "convex":
        raise SystemExit(f"error: --fusion {fusion}: use convex or default")
    return FusionSettings(Fusion.CONVEX, 0.1)


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


def _scale_queries(windows: Any, docs: int, count: int) -> tuple[np.ndarray, list[str]]:
    """The scale stages' queries: each a vector near one window of a random document (σ = 0.02) and 5 words of that
    document's text (seeded: every stage and run asks the same queries)."""
    texts = _scale_texts(docs)
    rng = np.random.default_rng(2)
    picks = rng.integers(0, docs, size=count)
    vectors = np.asarray(windows.vectors[picks * PER_DOC + rng.integers(0, PER_DOC, size=count)])
    vectors = vectors + rng.normal(0, 0.02, size=vectors.shape).astype(np.float32)
    return vectors, _five_words([texts[d] for d in picks], rng)


def stage_scale_depth(args: argparse.Namespace) -> None:
    """Why the fused top 10 at `args.windows` windows misses documents of the exact fused scan, and what the proposal
    depth buys back: for each depth in `args.depths`, the recall of the top 10 against the exact scan, how often
    the first hit agrees, the share of missed documents whose exact fused score is within 1 % of the 10th found, the
    fused score the index's top 10 keeps (sum of their exact fused scores ÷ the exact top 10's), and the p50 / p99
    of a query alone. The queries are the scale stage's first `args.recall_queries`."""
    from lengthwise.core.fusion import Mode
    from lengthwise.core.scoring import WindowScoring
    from lengthwise.facade import LongIndex
    from lengthwise.search.lexical.bm25 import open_lexical
    from lengthwise.search.searcher import Searcher

    fusion = getattr(args, "fusion", "convex")
    key = _scale_key(args.windows, args.granularity, fusion)
    folder = args.work / f"scale-{args.windows}" / "index"
    index = LongIndex.open(folder)
    searcher = Searcher(index.windows, open_lexical(_lexical_folder(folder, args.granularity)), index.queries,
                        WindowScoring(), "no text")  # fmt: skip
    vectors, texts = _scale_queries(index, args.windows // PER_DOC, args.queries)
    asked, load_before = list(range(args.recall_queries)), _load()
    exact = _exact_fused_batched(searcher, scale_fusion(fusion), vectors[asked], texts[: len(asked)], 10)
    rows = {}
    for depth in args.depths:
        settings = replace(scale_fusion(fusion), depth=depth)

        def search(n: int, settings: Any = settings) -> Any:
            return searcher.rank(vectors[n : n + 1], texts[n : n + 1], 10, Mode.HYBRID, settings)

        timed = _timed(search, asked, 1)
        rows[str(depth)] = {**_against_exact(searcher, settings, vectors, texts, exact), "latency_clients_1": timed}
        print(depth, rows[str(depth)], flush=True)
    out = json.loads(RESULTS.read_text()).get("scale_depth", {}) if RESULTS.is_file() else {}
    section = {"windows": args.windows, "granularity": args.granularity, "queries": len(asked), "depths": rows,
               "load": [load_before, _load()]}  # fmt: skip
    _write("scale_depth", {**{k: v for k, v in out.items() if k != "environment"}, key: section})


def stage_recall(args: argparse.Namespace) -> None:
    """The chosen arm through each retrieval index (ANN candidates, `LongIndex` hybrid search) against the exact fused
    scan of every document: nDCG@10 both ways and the share of the exact top 10 found (`eval --index --mode`)."""
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig
    from lengthwise.search.lexical.bm25 import LexicalIndex

    table = json.loads(RESULTS.read_text())["quality"]["table"]
    arm = choose(table)["chosen"]
    granularity, fusion = arm_settings(arm)
    rows, load_before = {}, _load()
    for name, data in (("qmsum", args.qmsum), ("scifact", None)):
        folder = args.work / name / "index"
        if not folder.is_dir():
            continue
        lexical = json.loads((_lexical_folder(folder, "window") / "lexical.json").read_text())["granularity"]
        if granularity != lexical:  # the quality stage's BM25 of the other granularity, in a copy of the index
            other = args.work / name / f"lexical-{granularity}"
            copy = args.work / name / f"index-{granularity}"
            shutil.rmtree(copy, ignore_errors=True)  # the quality stage reads `index/lexical`: it is left as it is
            shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("lexical"), copy_function=os.link)
            shutil.copytree(other, _lexical_folder(copy, "window"), copy_function=os.link)
            generation = json.loads((copy / "index.json").read_text(encoding="utf-8"))["generation"]
            LexicalIndex.open(_lexical_folder(copy, "window")).record(generation=generation)  # replaced, not written
            folder = copy
        index = lw.LongIndex.open(folder)
        index.lexical.record(mode="hybrid", fusion=fusion.to_dict())
        beir = data if data is not None else _scifact_beir(args)
        retrieval = RetrievalConfig(top_k=10, recall_k=10, map_k=10)
        for split in ("dev", "test"):
            record = lw.evaluate(EvalConfig(task="retrieval", data=beir, split=split, retrieval=retrieval),
                                 index=folder, mode="hybrid")  # fmt: skip
            rows[f"{name}-{split}"] = {"index_ndcg@10": record["scores"]["ndcg@10"],
                                       "exact_ndcg@10": record["exact_scores"]["ndcg@10"],
                                       "top10_recall": record["index"]["overlap"]}  # fmt: skip
            print(name, split, rows[f"{name}-{split}"], flush=True)
    _write("recall", {"arm": arm, "rows": rows, "load": [load_before, _load()]})


def stage_tuned(args: argparse.Namespace) -> None:
    """`lengthwise index tune` on each retrieval set's own dev split, then test through the tuned index: what a user
    gets who tunes the fusion per corpus (`index tune`) instead of keeping the default chosen across the four sets.
    The index is a copy (hard links) of the recall stage's, with the default window BM25."""
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig
    from lengthwise.pipelines import tune_hybrid

    rows, load_before = {}, _load()
    for name, data in (("qmsum", args.qmsum), ("scifact", None)):
        source = args.work / name / "index-window"
        if not source.is_dir():
            print(f"{name}: no {source} (run the recall stage first)", flush=True)
            continue
        folder = args.work / name / "index-tuned"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(source, folder, copy_function=os.link)  # tuning replaces lexical.json, never writes into it
        beir = data if data is not None else _scifact_beir(args)
        tuned = tune_hybrid(folder, beir, split="dev")
        retrieval = RetrievalConfig(top_k=10, recall_k=10, map_k=10)
        record = lw.evaluate(EvalConfig(task="retrieval", data=beir, split="test", retrieval=retrieval), index=folder)
        rows[name] = {"mode": tuned["mode"], "fusion": tuned["fusion"], "dev_ndcg@10": tuned["scores"],
                      "test_index_ndcg@10": record["scores"]["ndcg@10"],
                      "test_exact_ndcg@10": record["exact_scores"]["ndcg@10"],
                      "top10_recall": record["index"]["overlap"]}  # fmt: skip
        print(name, rows[name], flush=True)
    _write("tuned", {"rows": rows, "load": [load_before, _load()]})


NOTICE = (
    "This record is held in the county archive. It may be copied for private study and research only. "
    "No part of it may be sold, and every copy must carry this notice. The archive does not warrant that "
    "the record is complete or correct, and accepts no liability for its use. Enquiries go to the reading "
    "room, which is open on weekdays."
)  # the boilerplate opening and closing every document of the stage
SYLLABLES = ("vor", "lan", "thi", "mer", "osk", "ral", "den", "quo", "bri", "zel", "fan", "tur", "ish", "pol", "gra")


def _duplicated_beir(folder: Path, docs: int, seed: int = 0) -> Path:
    """A BEIR folder of `docs` near-copies: the same notice first and last, the same essay paragraph repeated 1 to 6
    times between, and one sentence of each document's own (a ledger's cabinet, under a made-up name) between two
    repeats; one query per document asks for its sentence in other words."""
    from lengthwise.core._textio import open_text

    with open_text(ROOT / "data" / "essays" / "thoreau-walden-and-civil-disobedience.txt.gz") as handle:
        lines = [line.strip() for _, line in handle.lines() if line.strip()]
    filler = " ".join(lines[3:5])
    rng, names = random.Random(seed), set[str]()
    while len(names) < docs:
        names.add("".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize())
    corpus, queries, qrels = [], [], []
    for n, name in enumerate(sorted(names)):
        repeats = 1 + n % 6
        parts = [filler] * repeats
        parts.insert(rng.randint(0, repeats), f"The {name} ledger is kept in cabinet {rng.randint(100, 999)}.")
        corpus.append({"_id": f"d{n}", "text": " ".join([NOTICE, *parts, NOTICE])})
        queries.append({"_id": f"q{n}", "text": f"Which cabinet holds the ledger of {name}?"})
        qrels.append(f"q{n}\td{n}\t1\n")
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus", corpus), ("queries", queries)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return folder


def stage_duplicated(args: argparse.Namespace) -> None:
    """Hybrid search on a corpus of near-copies (boilerplate and repeated filler, `_duplicated_beir`): each mode
    through the default index (USearch int8 + window BM25, as `index build` makes it) against its exact scan."""
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig

    torch.set_num_threads(args.threads)
    work = args.work / f"duplicated-{args.docs}"
    beir = _duplicated_beir(work / "beir", args.docs)
    started, load_before = time.perf_counter(), _load()
    lw.encode(beir / "corpus.jsonl", work / "encoded", threads=args.threads, show_progress=True)
    if not (work / "index" / "index.json").is_file():
        lw.LongIndex.build(work / "encoded", work / "index")
    index = lw.LongIndex.open(work / "index")
    vectors = np.asarray(index.vectors)
    distinct = len(np.unique(vectors, axis=0))
    rows: dict[str, Any] = {}
    retrieval = RetrievalConfig(top_k=10, recall_k=10, map_k=10)
    for mode in ("dense", "lexical", "hybrid"):
        record = lw.evaluate(EvalConfig(task="retrieval", data=beir, split="test", retrieval=retrieval),
                             index=work / "index", mode=mode)  # fmt: skip
        rows[mode] = {"index_ndcg@10": record["scores"]["ndcg@10"], "exact_ndcg@10": record["exact_scores"]["ndcg@10"],
                      "index_recall@10": record["scores"]["recall@10"],
                      "exact_recall@10": record["exact_scores"]["recall@10"],
                      "top10_overlap": record["index"]["overlap"]}  # fmt: skip
        print(mode, rows[mode], flush=True)
    _write("duplicated", {"documents": args.docs, "windows": len(vectors), "distinct_window_vectors": distinct,
                          "engine": index.settings.get("engine"), "quantize": index.settings.get("quantize"),
                          "granularity": index.lexical.settings["granularity"], "rows": rows,
                          "seconds": round(time.perf_counter() - started), "load": [load_before, _load()]})  # fmt: skip


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


def _key(name: str) -> str:
    """A results-file path key as scripts/docs_figures.py reads it: quoted when it holds a dot."""
    return f'"{name}"' if "." in name or "-" in name else name


def markdown_table(section: str = "quality") -> str:
    """The study's table as docs/longdoc.md quotes it, with the figure-table comment that traces every cell to the
    results file: every arm's dev and test score on every corpus (`section`: ``quality``, all-MiniLM-L6-v2, or
    ``quality_models.all-mpnet-base-v2``), the dev mean and worst dev regret the rule reads (fusions an index serves
    only: the sides alone and ``*-both`` have none), the chosen arm in bold."""
    results = json.loads(RESULTS.read_text())
    node = results
    for key in section.split(".", 1) if section != "quality" else [section]:
        node = node[key]
    data, path = node["table"], ".".join(_key(k) for k in section.split(".", 1)) if section != "quality" else section
    chosen = choose(data)
    corpora = [s for s in SETS if f"{s}-test" in data and f"{s}-dev" in data]
    first = data[f"{corpora[0]}-test"]
    arms = ["dense", "bm25-document", "bm25-window", *[a for a in first if a not in ("dense", "bm25-document",
                                                                                        "bm25-window")]]  # fmt: skip
    traced = ",".join(str(n) for n in range(2, 2 + 2 * len(corpora)))
    rows = [f"{_key(a)}" + ("" if a in chosen["means"] else f" cols={traced}") for a in arms]
    cols = [f"col {2 + 2 * n + k}: {path}.table.{_key(f'{c}-{split}')}.{{row}} fmt=.2f"
            for n, c in enumerate(corpora) for k, split in enumerate(("dev", "test"))]  # fmt: skip
    last = 2 + 2 * len(corpora)
    rule = f"{path}.{'choice' if section == 'quality' else 'chosen_here'}"  # choose(table) as the stage wrote it
    cols += [f"col {last}: {rule}.means.{{row}} fmt=.2f", f"col {last + 1}: {rule}.worst_regret.{{row}} fmt=.2f"]
    comment = ["<!-- figure-table: bench_hybrid.json", "rows: " + " ; ".join(rows), *cols, "-->"]
    head = "| arm | " + " | ".join(f"{c} dev | {c} test" for c in corpora) + " | dev mean | worst dev regret |"
    lines = [*comment, head, "|" + " --- |" * (2 * len(corpora) + 3)]
    for arm in arms:
        cells = [f"{data[f'{c}-{split}'][arm]:.2f}" for c in corpora for split in ("dev", "test")]
        mean, worst = chosen["means"].get(arm), chosen["worst_regret"].get(arm)
        cells += ["–" if mean is None else f"{mean:.2f}", "–" if worst is None else f"{worst:.2f}"]
        name = f"**{arm}** (chosen)" if arm == chosen["chosen"] else arm
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


STAGES = {"quality": stage_quality, "engines": stage_engines, "recall": stage_recall, "scale": stage_scale,
          "scale-depth": stage_scale_depth,
          "text-side": stage_text_side, "window-query": stage_window_query, "tuned": stage_tuned,
          "duplicated": stage_duplicated, "aggregations": stage_aggregations}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("stage", choices=[*STAGES, "engine-run", "choose", "scale-model", "table"])
    parser.add_argument("engine", nargs="?", default="bm25s")
    parser.add_argument("--work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid"))
    parser.add_argument("--qmsum", type=Path, default=ROOT / "data" / "qmsum")
    parser.add_argument("--newsgroups", type=Path, default=ROOT / "data" / "newsgroups")
    parser.add_argument("--replies", type=Path, default=ROOT / "data" / "replies")
    parser.add_argument("--scifact", type=Path, default=ROOT.parent / "shared" / "data" / "scifact")
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help="quality: another model checks the default on a second model family")  # fmt: skip
    parser.add_argument("--synthetic-work", type=Path, default=Path("/tmp/lengthwise-bench-hybrid-n50"),
                        help="aggregations: the quality run's work folder of the passkey and needle sets")  # fmt: skip
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--per-length", type=int, default=10)
    parser.add_argument("--dev-per-length", type=int, default=4)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--windows", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="scale: alternated repeats of each mode (medians)")
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--depths", default="100,200,400,1000", type=lambda v: [int(d) for d in v.split(",")],
                        help="scale-depth: the proposal depths (documents each side proposes) to compare")  # fmt: skip
    parser.add_argument("--granularity", choices=["window", "document", "both"], default="window",
                        help="scale: the lexical side's granularity (document, both: in lexical-document, "
                        "lexical-both)")  # fmt: skip
    parser.add_argument("--fusion", choices=["convex", "default"], default="convex",
                        help="scale: convex at weight 0.1 (the figures before issue 49) or the library's default "
                        "fusion (z-score over the proposals)")  # fmt: skip
    parser.add_argument("--build-only", action="store_true",
                        help="scale: build both sides, record their figures; time queries in a later run")  # fmt: skip
    parser.add_argument("--label", default="current",
                        help="text-side: the code measured (e.g. before / after); scale: a suffix of the section's "
                        "key, to record a re-run beside the figures of the plain key")  # fmt: skip
    parser.add_argument("--orders", default="same,shuffled", type=lambda v: v.split(","),
                        help="text-side: the corpus file in the index's order (same), shuffled, or both")  # fmt: skip
    parser.add_argument("--sets", default=",".join(SETS), type=lambda v: v.split(","))
    parser.add_argument("--section", default="quality",
                        help="table: the results section (quality, or quality_models.all-mpnet-base-v2)")  # fmt: skip
    args = parser.parse_args()
    if args.stage in STAGES:
        STAGES[args.stage](args)
    elif args.stage == "table":
        print(markdown_table(args.section))
    elif args.stage == "scale-model":
        print(record_scale_model(args.windows, args.work))
    elif args.stage == "engine-run":
        print(json.dumps(_engine_run(args.engine, args.docs, args.work)))
    else:  # the rule applied again to the recorded table (after an amendment of the rule), written back
        quality = json.loads(RESULTS.read_text())["quality"]
        quality = {**{k: v for k, v in quality.items() if k != "environment"}, "rule": RULE}
        _write("quality", {**quality, "choice": choose(quality["table"])})
        print(json.dumps(quality["choice"] if "choice" in quality else choose(quality["table"]), indent=1))


if __name__ == "__main__":
    main()
