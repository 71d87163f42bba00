"""A batch of queries on an index of a few long documents: every window read once for the batch, or once a query.

When an index holds no more documents than a query's rescoring reaches (100 for a top 10), every query scores every
document on all its windows; `LocalWindows.whole_scans` does that for the whole batch in one read of the windows
(`lengthwise.core.encoder.row_products`). This benchmark searches batches of QMSum's queries (11 a batch, about what
the service's batcher hands on at 32 clients) in dense and hybrid mode, on one search thread and one torch thread,
with the batch scan (``whole``, the default) and with it switched off (``each``: each query's documents scored on
their own, as before), alternating; the figure is the median over the repeats of the CPU milliseconds a query. The
queries are embedded once beforehand (the model is not timed), and the two arms' hits are compared (ids and scores).

The index: QMSum's 70 meetings (data/qmsum) with the library's defaults, e.g.

    zcat data/qmsum/corpus.jsonl.gz > /tmp/qm/corpus.jsonl
    lengthwise encode -d /tmp/qm/corpus.jsonl -o /tmp/qm/emb -m MINILM_DIR
    lengthwise index build /tmp/qm/emb --out /tmp/qm/idx
    python -m benchmarks.search.whole_scans /tmp/qm/idx --out docs/results/bench_whole_scans.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lengthwise.core.results import environment, write_json_atomic
from lengthwise.search.local import windows as local_windows

QUERIES = Path(__file__).resolve().parents[2] / "data/qmsum/queries.jsonl.gz"
ARMS = ("whole", "each")


def _searched(index: Any, batches: list[tuple[list[str], np.ndarray]], mode: str) -> list[list[tuple[str, float]]]:
    return [[(hit.id, hit.score) for hit in row] for texts, vectors in batches
            for row in index.search(texts, 10, mode=mode, vectors=vectors, search_threads=1)]  # fmt: skip


def main() -> None:
    import lengthwise as lw

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("index", type=Path, help="a folder written by `lengthwise index build`")
    parser.add_argument("--out", type=Path, default=Path("docs/results/bench_whole_scans.json"))
    parser.add_argument("--batch", type=int, default=11, help="queries a batch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    index = lw.LongIndex.open(args.index)
    with gzip.open(QUERIES, "rt", encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle]
    vectors = np.asarray(index.embed_queries(texts), dtype=np.float32)
    batches = [(texts[s : s + args.batch], vectors[s : s + args.batch]) for s in range(0, len(texts), args.batch)]
    whole = local_windows.LocalWindows.whole_scans
    switch = {"whole": whole, "each": lambda self, units, *args: [None] * len(units)}
    results: dict[str, Any] = {}
    for mode in ("dense", "hybrid"):
        ms: dict[str, list[float]] = {arm: [] for arm in ARMS}
        hits = {}
        for arm in ARMS:  # warm-up, and the hits compared
            local_windows.LocalWindows.whole_scans = switch[arm]  # type: ignore[method-assign]
            hits[arm] = _searched(index, batches, mode)
        for _ in range(args.repeats):
            for arm in ARMS:
                local_windows.LocalWindows.whole_scans = switch[arm]  # type: ignore[method-assign]
                began = time.process_time()
                _searched(index, batches, mode)
                ms[arm].append((time.process_time() - began) / len(texts) * 1e3)
        local_windows.LocalWindows.whole_scans = whole  # type: ignore[method-assign]
        median = {arm: statistics.median(values) for arm, values in ms.items()}
        pairs = [(a, b) for x, y in zip(hits["whole"], hits["each"], strict=True) for a, b in zip(x, y, strict=True)]
        results[mode] = {
            "cpu_ms_per_query": {arm: round(value, 3) for arm, value in median.items()},
            "each_over_whole": round(median["each"] / median["whole"], 3),
            "same_ids": sum(
                len(x) == len(y) and all(a[0] == b[0] for a, b in zip(x, y, strict=True))
                for x, y in zip(hits["whole"], hits["each"], strict=True)
            ),
            "identical_hits": sum(x == y for x, y in zip(hits["whole"], hits["each"], strict=True)),
            "max_score_diff": max((abs(a[1] - b[1]) for a, b in pairs), default=0.0),
            "cpu_ms_per_query_all": {arm: [round(v, 3) for v in values] for arm, values in ms.items()},
        }
        print(mode, json.dumps(results[mode]["cpu_ms_per_query"]), results[mode]["each_over_whole"], flush=True)
    payload = {
        "benchmark": "a batch's exact rescoring on an index of a few long documents: one read of the windows a "
        "batch (whole) against one a query (each)",
        "index": {"folder": str(args.index), "windows": len(index.vectors), "documents": len(index.doc_ids)},
        "queries": {"file": QUERIES.name, "count": len(texts), "batch": args.batch},
        "results": results,
        "settings": {"repeats": args.repeats, "search_threads": 1, "torch_threads": 1, "k": 10},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "environment": environment(),
    }
    write_json_atomic(args.out, payload)


if __name__ == "__main__":
    main()
