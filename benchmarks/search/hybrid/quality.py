"""The hybrid benchmark's study of the default fusion: stages ``quality``, ``aggregations`` and ``tuned``.

``quality`` scores every arm (each side alone, every fusion an index serves over document and window BM25, and both
granularities together) from exact scores on QMSum, SciFact, 20 Newsgroups subjects and replies (nDCG@10) and
realistic passkey and needle (Acc@1), dev and test; the default is chosen on dev by the rule of docs/longdoc.md
(`_rule.choose`), and another ``--model`` checks that choice (section ``quality_models``). ``aggregations``: dev
only, other ways to score a document from its windows (an exploration). ``tuned``: `lengthwise index tune` per
corpus on QMSum's and SciFact's dev splits, then their test splits. benchmarks/README.md describes every stage."""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.search.hybrid._common import (
    DEFAULT_MODEL,
    LENGTHS,
    _indexed,
    _load,
    _read,
    _retrieval_sets,
    _scifact_beir,
    _score_matrices,
    _section,
    _synthetic_sets,
    _write,
)
from benchmarks.search.hybrid._rule import DEV_SETS, RULE, SETS, UNWEIGHTED, WEIGHTED, choose
from lengthwise.core.fusion import TUNED_WEIGHTS

WEIGHTS = TUNED_WEIGHTS  # the quality stage tries the weights `index tune` tries


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
    earlier = _section("quality")
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
    results = _read()  # the default model's table is there: the check compares with it
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


def _summary(row: dict[str, float]) -> str:
    best = max((a for a in row if a.split("-")[0] in WEIGHTED + UNWEIGHTED), key=row.__getitem__)
    return (f"dense {row['dense']}, bm25 doc {row['bm25-document']} / window {row['bm25-window']}, "
            f"best fusion {best} {row[best]}")  # fmt: skip


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
