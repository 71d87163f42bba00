"""Stage ``recall`` of the hybrid benchmark: the arm the quality stage chose, through each retrieval index (ANN
candidates), against the exact fused scan: nDCG@10 both ways and the share of the exact top 10 found."""

from __future__ import annotations

import argparse
import json
import os
import shutil

from benchmarks.search.hybrid._common import _lexical_folder, _load, _read, _scifact_beir, _write
from benchmarks.search.hybrid._rule import arm_settings, choose


def stage_recall(args: argparse.Namespace) -> None:
    """The chosen arm through each retrieval index (ANN candidates, `LongIndex` hybrid search) against the exact fused
    scan of every document: nDCG@10 both ways and the share of the exact top 10 found (`eval --index --mode`)."""
    import lengthwise as lw
    from lengthwise.evaluation.config import EvalConfig, RetrievalConfig
    from lengthwise.search.lexical.bm25 import LexicalIndex

    table = _read()["quality"]["table"]
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
