"""Stage ``duplicated`` of the hybrid benchmark: ``--docs`` near-copies (the same notice first and last, the same
essay paragraph repeated 1 to 6 times, one sentence of their own), a query each: dense, lexical and hybrid search
through the default index against their exact scans, with the share of window vectors that are distinct."""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.search.hybrid._common import ROOT, _load, _write

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
